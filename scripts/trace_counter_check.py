"""Do a run's counter tracks read back in Perfetto's trace processor what the records hold?

    python scripts/trace_counter_check.py RUN_DIR [--trace T | --build OUT] [--before OLD.pftrace]

Per counter track: samples and zeros in the records, samples and zeros in the trace processor, and
the samples that differ (timestamp and value), including the perf samples' counter (checked against
the sample records: per CPU, the running sum of their periods, or their count where none was
recorded). --build writes the trace from RUN_DIR with this checkout's code to OUT first (never over
RUN_DIR's own trace unless OUT is it). --before adds the same figures for another trace of the same
run (e.g. one built by an older checkout) beside them, and both sizes.

Exit status 0 when every recorded track of the (after) trace reads back exactly, 1 when one does not,
2 when the trace processor cannot run or there is no trace.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hwprof.trace.counters import CounterCheck, TrackCheck, check_counters
from hwprof.trace.perfetto import build_trace
from hwprof.trace.processor import TraceProcessorUnavailable, TraceSession


def _key(t: TrackCheck) -> tuple[str, str]:
    return (t.pass_name, "perf samples' counter" if t.perf else t.name)


def side_by_side(before: CounterCheck, after: CounterCheck) -> list[str]:
    """One row per track: records' samples and zeros, then zeros and differing samples in each trace."""
    old = {_key(t): t for t in before.tracks}
    head = (
        f"{'pass':8} {'track':52} {'records':>8} {'zeros':>6} | {'before: zeros':>13} {'differ':>6} "
        f"| {'after: zeros':>12} {'differ':>6}"
    )
    out = [head, "-" * len(head)]
    for t in after.tracks:
        b = old.get(_key(t))
        name = t.name if b is None or b.name == t.name else f"{t.name} (before: {b.name})"
        before_cells = f"{b.trace_zeros:13d} {max(b.missing, b.extra):6d}" if b else f"{'-':>13} {'-':>6}"
        out.append(
            f"{t.pass_name:8.8} {name:52} {t.records:8d} {t.records_zeros:6d} | {before_cells} "
            f"| {t.trace_zeros:12d} {max(t.missing, t.extra):6d}"
        )
    out.append(
        "(differ: samples of the records the trace does not hold, by timestamp and value; more if it adds others)"
    )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--trace", type=Path, help="the trace to check (default RUN_DIR/trace.pftrace)")
    parser.add_argument("--build", type=Path, metavar="OUT", help="build the trace from RUN_DIR into OUT first")
    parser.add_argument("--before", type=Path, help="another trace of the run to show beside it")
    args = parser.parse_args()
    trace = args.trace or args.run_dir / "trace.pftrace"
    if args.build:
        trace = build_trace(args.run_dir, args.build).path
    traces = [p for p in (args.before, trace) if p is not None]
    if missing := [p for p in traces if not p.is_file()]:
        print(f"no trace at {missing[0]}: run `hwprof trace {args.run_dir}` or pass --build OUT", file=sys.stderr)
        return 2
    try:
        checks = []
        for path in traces:
            with TraceSession(path) as tp:
                checks.append(check_counters(tp, args.run_dir))
    except TraceProcessorUnavailable as exc:
        print(exc, file=sys.stderr)
        return 2
    for path, label in zip(traces, ("before", "after") if args.before else ("trace",), strict=True):
        print(f"{label}: {path} ({path.stat().st_size} bytes)")
    print(f"against the records of {args.run_dir}:")
    print("\n".join(side_by_side(*checks) if args.before else checks[0].lines()))
    if args.before:
        size_before, size_after = (p.stat().st_size for p in traces)
        change = size_after - size_before
        print(f"trace size: {size_before} -> {size_after} bytes ({change:+d}, {change / size_before:+.2%})")
    return 0 if checks[-1].ok else 1


if __name__ == "__main__":
    sys.exit(main())
