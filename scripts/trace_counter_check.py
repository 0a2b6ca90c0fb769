"""Do a run's counter tracks read back in Perfetto's trace processor what the records hold?

    python scripts/trace_counter_check.py RUN_DIR [--trace path/to/trace.pftrace] [--build OUT.pftrace]

Per counter track: samples and zeros in the records, samples and zeros in the trace processor, and
the samples that differ (timestamp and value), then the counter tracks no record names (the perf
samples' timebase tracks). --build writes the trace from RUN_DIR with this checkout's code to OUT
first (never over RUN_DIR's own trace unless OUT is it) and prints its size. To check a trace that
another checkout built, build it there and pass --trace.

Exit status 0 when every recorded track reads back exactly, 1 when one does not, 2 when the trace
processor cannot run or there is no trace.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hwprof.render.perfetto import build_trace
from hwprof.render.trace_counters import check_counters
from hwprof.render.trace_processor import TraceProcessorUnavailable, TraceSession


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--trace", type=Path, help="the trace to check (default RUN_DIR/trace.pftrace)")
    parser.add_argument("--build", type=Path, metavar="OUT", help="build the trace from RUN_DIR into OUT first")
    args = parser.parse_args()
    trace = args.trace or args.run_dir / "trace.pftrace"
    if args.build:
        stats = build_trace(args.run_dir, args.build)
        trace = stats.path
        print(
            f"built {trace}: {stats.size_bytes} bytes, {stats.packets} packets, {stats.counter_samples} counter samples"
        )
    if not trace.is_file():
        print(f"no trace at {trace}: run `hwprof trace {args.run_dir}` or pass --build OUT", file=sys.stderr)
        return 2
    try:
        with TraceSession(trace) as tp:
            result = check_counters(tp, args.run_dir)
    except TraceProcessorUnavailable as exc:
        print(exc, file=sys.stderr)
        return 2
    print(f"{trace} ({trace.stat().st_size} bytes) against the records of {args.run_dir}:")
    print("\n".join(result.lines()))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
