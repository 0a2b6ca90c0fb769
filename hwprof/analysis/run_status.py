"""A finished run's status in lines: the processes its passes' workers left behind, and its problems (a pass that
did not finish, a collector that failed, an annotated output that could not be kept, the workload's own); `hwprof
collect` prints them and exits 1 where there is a problem (hwprof.cli.exit_codes)."""

from __future__ import annotations

from hwprof.analysis.workload import workload_view
from hwprof.schema.run import RunDoc


def lingering_lines(run: RunDoc) -> list[str]:
    """One line per process a pass's worker left behind, which the session stopped."""
    how = {"exited": "it ended on its own", "survived": "it could not be stopped"}
    return [
        f"pass {name}: the worker left {x['name']} (pid {x['pid']}, state {x['state']}: "
        f"{' '.join(x['cmdline'])[:120]}) running; {how.get(x['stopped_by'], 'stopped by ' + x['stopped_by'])} "
        f"{x['lingered_s']:.1f} s after the worker exited"
        for name, p in run.passes.items()
        for x in p.lingering or []
    ]


def run_problems(run: RunDoc) -> list[str]:
    """One line per pass that did not finish and per collector that failed (unavailable is not a failure), and
    the annotated output when none could be kept."""
    lines = [
        f"pass {name} {p.status}: {p.error if p.error is not None else ''}"
        for name, p in run.passes.items()
        if p.status != "ok"
    ]
    lines += [
        f"collector {name} failed: {c.reason if c.reason is not None else ''}"
        for name, c in run.collectors.items()
        if c.status == "failed"
    ]
    if run.annotated is not None and run.annotated.error:
        lines.append(f"--annotate: {run.annotated.error}")
    return lines + workload_view(run).problems
