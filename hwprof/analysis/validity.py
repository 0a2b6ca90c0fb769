"""Figures a run recorded as measured that analysis must set aside, and why.

A run directory may come from an older hwprof or another machine. When its own data show that a
collector's figures were never measured (an energy counter that did not move once over the measured
iterations, recorded as 0 J with status ok), analysis treats that collector as unavailable with the
reason, so that no report, table or plot shows the zero. Newer collectors detect the same at
collection time (collectors/rapl/still.py; the shared part: hwprof.schema.rapl_still) and never record the zeros.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from hwprof.rundir.reader import RunData
from hwprof.schema.rapl_still import NO_FIX


def still_energy_reason(entry: dict[str, Any]) -> str | None:
    """Why a rapl entry recorded as measured holds no measurement: every domain read 0 J over every
    measured iteration, and the update-interval probe saw the counter change fewer than 3 times."""
    if entry.get("status") not in ("ok", "partial"):
        return None
    summary = entry.get("summary", {})
    per_inf = summary.get("per_inference", {})
    domains = per_inf.get("domains_J_per_inference") or {}
    stages = summary.get("stages", {})
    if not domains or any(v != 0 for v in domains.values()):
        return None
    if any(s.get("max", 0) != 0 or s.get("min", 0) != 0 for s in stages.values()):
        return None
    probe = summary.get("update_interval", {})
    if probe.get("value_ms") is not None:
        return None
    iterations = per_inf.get("iterations", "?")
    reads = summary.get("marker_reads", "?")
    return (
        f"the energy counter {', '.join(domains)} never changed during the {iterations} measured iterations "
        f"({reads} reads, 0 J in every stage; {probe.get('reason', 'no update step was seen')}): it is offered but "
        "does not count on that machine, and the run recorded its zeros as measured"
    )


def checked(data: RunData) -> RunData:
    """The run as analysis should see it: collectors whose figures fail a check above are unavailable."""
    entries = data.run.get("collectors", {})
    reason = still_energy_reason(entries.get("rapl", {}))
    if reason is None:
        return data
    run = copy.deepcopy(data.run)
    run["collectors"]["rapl"] = {
        **entries["rapl"],
        "status": "unavailable",
        "reason": reason,
        "fix": NO_FIX,
        "set_aside_by_analysis": True,
    }
    return replace(data, run=run, withheld=data.withheld | {"rapl"})
