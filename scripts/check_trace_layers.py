"""Does a run's trace show what its report counts? Four checks in Perfetto's own trace processor.

    python scripts/check_trace_layers.py results/<run-id> [--trace path/to/trace.pftrace]

1. every forward on every track that has layers has exactly the model's number of direct layer children;
2. no layer slice has a parent other than a forward or a layer;
3. per layer, the CPU samples (perf_sample table) whose instant lies in its measured time ranges
   equal the report's per-layer sample count (the kernels pass's table);
4. no sampled stack still drawn as a slice (py-spy's runs of an unchanged stack) crosses a layer boundary.

Exit status 0 when all three hold, 1 when one does not, 2 when the trace processor cannot run.
The trace processor is the Perfetto UI's wasm under Node (see hwprof/trace/processor.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hwprof.trace.layer_checks import check_layers
from hwprof.trace.processor import TraceProcessorUnavailable, TraceSession


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--trace", type=Path, help="the trace to check (default RUN_DIR/trace.pftrace)")
    args = parser.parse_args()
    trace = args.trace or args.run_dir / "trace.pftrace"
    if not trace.is_file():
        print(f"no trace at {trace}: run `hwprof trace {args.run_dir}` first", file=sys.stderr)
        return 2
    try:
        with TraceSession(trace) as tp:
            result = check_layers(tp, args.run_dir)
    except TraceProcessorUnavailable as exc:
        print(exc, file=sys.stderr)
        return 2
    print(f"{trace}:")
    print("\n".join(result.lines()))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
