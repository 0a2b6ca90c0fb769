"""What other work on the run's CPUs did to a run's figures, in words the report can print.

Each pass records the CPU time processes outside the run took on the run's CPUs
(run.json passes.<pass>.neighbours, hwprof.perf.neighbours). Its uses:
- a paired cost whose ABBA blocks did not resolve for noise (PassCostFigure.resolved) is shown as "not
  resolved (...)", naming the processes that took the CPUs, or saying that none was seen (others_text);
- the timing pass is the base of every millisecond figure (stages, layer times are scaled to its
  forward p50), so a disturbed timing pass is flagged wherever those are shown;
- a pass during which other work took more than DISTURBED_SHARE of the CPUs is unfit for a verdict
  (pass_disturbance, read by hwprof.analysis.health for the findings, the gate and compare).
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from hwprof.analysis.paired_cost import PAIRED
from hwprof.perf.neighbours import NeighbourLoad

if TYPE_CHECKING:
    from hwprof.schema.run import RunDoc

DISTURBED_SHARE = 0.10
"""Other work above this share of the run's CPUs' capacity during a pass disturbs its timings: with
as many torch threads as CPUs, a forward's threads meet at barriers after every op, so a thread that
loses its CPU for a share s of the time delays the whole forward by at least s (more on a host
whose scheduler time-slices a busy CPU in ms while an op lasts us). The same line as the peaks'
interference limit (hwprof.hardware.machine.INTERFERENCE_BUSY): 10% is well above what the idle VM's
daemons and the /proc/stat tick resolution (a 10 ms tick per CPU at each end) account for."""
NEGLIGIBLE_SHARE = 0.02
"""Below this share the other work seen is within /proc/stat's resolution and an idle host's
daemons: an unresolved figure is then put down to host noise, not to a named process."""
DISTURBED_P50_RATIO = 1.5
"""The timing pass's forward p50 above this many times the clean iterations' p50 of a paired pass
(the same model with the same threads, hooks off) is a disturbed timing pass too, whatever /proc
says: a clean forward does not run 50% slower in one process than in another on a quiet host."""


def pass_load(run: RunDoc, name: str) -> NeighbourLoad | None:
    """run.json passes.<name>.neighbours as a record (None: not recorded, or unavailable)."""
    entry = run.passes[name].neighbours if name in run.passes else None
    if not entry or entry.status == "unavailable":
        return None
    return NeighbourLoad.from_dict(entry.to_json())


def others_text(load: NeighbourLoad | None, short: bool = False) -> str:
    """Who took the CPUs, for a parenthesis: the named outsiders (short: their names only, for a table
    cell; else with pid, CPU seconds and the share of the CPUs), or why there are none."""
    if load is None:
        return "other work on these CPUs not recorded: a run from before hwprof measured it"
    if load.share < NEGLIGIBLE_SHARE:
        return f"no other work seen on these CPUs ({load.share:.1%} of their time); host noise"
    if short:
        return f"other work on these CPUs: {load.short_names() or 'processes too short-lived to name'}"
    took = f"{load.share:.0%} of these CPUs' time"
    if load.top:
        return f"other work on these CPUs, {took}: {load.names()}"
    return f"other work on these CPUs, {took}, by processes too short-lived to name"


def clean_forward_ms(run: RunDoc) -> dict[str, float]:
    """Forward p50 of the clean iterations of each paired pass (run.json passes.*.overhead)."""
    out = {}
    for name, p in run.passes.items():
        figure = p.overhead
        if figure is not None and figure.method == PAIRED and figure.forward_off_ms:
            out[name] = float(figure.forward_off_ms)
    return out


def pass_disturbance(run: RunDoc, name: str) -> str | None:
    """Why pass `name` was disturbed, or None: other work above DISTURBED_SHARE of the run's CPUs during it
    (named). The timing pass has a second test of its own (timing_disturbance)."""
    load = pass_load(run, name)
    return f"the {name} pass was disturbed ({others_text(load)})" if _disturbs(load) else None


def _disturbs(load: NeighbourLoad | None) -> bool:
    """Other work above DISTURBED_SHARE of the run's CPUs."""
    return load is not None and load.share > DISTURBED_SHARE


def timing_health(run: RunDoc) -> tuple[str | None, str]:
    """The run's health as its timing pass gives it: ("clean" or "disturbed", why it is disturbed or ""), or
    (None, "") where no timing pass ran (an imported recording, a collect without it)."""
    if "timing" not in run.passes:
        return None, ""
    disturbed = timing_disturbance(run) or ""
    return ("disturbed" if disturbed else "clean"), disturbed


def timing_disturbance(run: RunDoc) -> str | None:
    """Why the timing pass's figures are not to be trusted as clean, or None when nothing says so:
    other work above DISTURBED_SHARE of the run's CPUs during it (named), or its forward p50
    more than DISTURBED_P50_RATIO x the clean iterations of a paired pass."""
    timing = run.passes.get("timing")
    if timing is None:
        return None
    reasons = []
    load = pass_load(run, "timing")
    if _disturbs(load):
        reasons.append(others_text(load))
    p50 = timing.forward_p50_ms
    clean = clean_forward_ms(run)
    if p50 and clean:
        base = statistics.median(clean.values())
        if p50 > DISTURBED_P50_RATIO * base:
            passes = ", ".join(clean)
            reasons.append(
                f"its forward p50 {p50:.2f} ms is {p50 / base:.2f}x the clean iterations of the {passes} pass"
            )
    if not reasons:
        return None
    return "the timing pass was disturbed (" + "; ".join(reasons) + ")"
