"""Figures a run recorded as measured that analysis must set aside, and why.

A run directory may come from an older hwprof or another machine. When its own data show that a
collector's figures were never measured (an energy counter that did not move once over the measured
iterations, recorded as 0 J with status ok), analysis treats that collector as unavailable with the
reason, so that no report, table or plot shows the zero. Newer collectors detect the same at
collection time (collectors/rapl/still.py; the shared part: hwprof.schema.rapl_still) and never record the zeros.
"""

from __future__ import annotations

from dataclasses import replace

from hwprof.rundir.reader import RunData
from hwprof.schema.rapl_still import NO_FIX
from hwprof.schema.run import RunDoc
from hwprof.schema.summaries_cpu import RaplPerInference, RaplSummary, RaplUpdateInterval


def still_energy_reason(run: RunDoc) -> str | None:
    """Why a rapl entry recorded as measured holds no measurement: every domain read 0 J over every
    measured iteration, and the update-interval probe saw the counter change fewer than 3 times."""
    if not run.entry("rapl").ran:
        return None
    summary = run.summary(RaplSummary)
    per_inf = summary.per_inference or RaplPerInference()
    domains = per_inf.domains_J_per_inference or {}
    stages = summary.stages or {}
    if not domains or any(v != 0 for v in domains.values()):
        return None
    if any((s.max or 0) != 0 or (s.min or 0) != 0 for s in stages.values()):
        return None
    probe = summary.update_interval or RaplUpdateInterval()
    if probe.value_ms is not None:
        return None
    iterations = per_inf.iterations if per_inf.iterations is not None else "?"
    reads = summary.marker_reads if summary.marker_reads is not None else "?"
    return (
        f"the energy counter {', '.join(domains)} never changed during the {iterations} measured iterations "
        f"({reads} reads, 0 J in every stage; {probe.reason or 'no update step was seen'}): it is offered but "
        "does not count on that machine, and the run recorded its zeros as measured"
    )


def checked(data: RunData) -> RunData:
    """The run as analysis should see it: collectors whose figures fail a check above are unavailable."""
    reason = still_energy_reason(data.doc)
    if reason is None:
        return data
    rapl = replace(data.doc.entry("rapl"), json_extra={**data.doc.entry("rapl").json_extra})
    rapl.update(status="unavailable", reason=reason, fix=NO_FIX)
    rapl.json_extra["set_aside_by_analysis"] = True  # written last, after the fields the update sets
    doc = replace(data.doc, collectors={**data.doc.collectors, "rapl": rapl})
    return replace(data, doc=doc, withheld=data.withheld | {"rapl"})
