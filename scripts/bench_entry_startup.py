"""The `hwprof` command's start-up, through the early-signal entry (hwprof.cli.entry) and without it (issue 38).

hwprof.cli.entry installs the stop-signal handlers before it imports the command line; this measures that it
costs nothing: the wall time from exec to exit of `hwprof ARGS`, started as the console script starts it,
through `hwprof.cli.entry:main` (new) and `hwprof.cli.main:main` (the entry point before), alternated A B B A
so that a drifting host load falls on both sides alike. Prints each side's median and quartiles and the
median of the paired differences.

    python scripts/bench_entry_startup.py                       # `hwprof models --help`, 20 pairs
    python scripts/bench_entry_startup.py --pairs 40 -- report tests/fixtures/rundir_small --format json
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

STARTERS = {
    "entry (new)": "import sys; from hwprof.cli.entry import main; sys.exit(main())",
    "cli.main (before)": "import sys; from hwprof.cli.main import main; sys.exit(main())",
}


def once(code: str, args: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-P", "-c", code, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("args", nargs="*", default=["models", "--help"], help="the hwprof command line to time")
    opts = parser.parse_args()
    (new_name, new), (old_name, old) = STARTERS.items()
    times: dict[str, list[float]] = {new_name: [], old_name: []}
    once(new, opts.args)  # warm the page cache and the bytecode caches
    for k in range(opts.pairs):
        order = [(new_name, new), (old_name, old)]
        for name, code in order if k % 2 == 0 else order[::-1]:
            times[name].append(once(code, opts.args))
    print(f"hwprof {' '.join(opts.args)}: wall time from exec to exit, {opts.pairs} alternated pairs")
    for name, values in times.items():
        q = statistics.quantiles(values, n=4)
        print(f"  {name:18} median {statistics.median(values) * 1e3:7.1f} ms  (IQR {q[0] * 1e3:.1f}-{q[2] * 1e3:.1f})")
    diffs = [a - b for a, b in zip(times[new_name], times[old_name], strict=True)]
    print(f"  paired difference (new - before): median {statistics.median(diffs) * 1e3:+.1f} ms")


if __name__ == "__main__":
    main()
