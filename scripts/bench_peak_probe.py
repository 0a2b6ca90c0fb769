"""What a first run's peak probe costs (issue 66: within 1.5 GB of resident memory and 10 s): `measure(threads)` of
hwprof.hardware.machine in a fresh child process, as a first collect runs it in its own process (torch imported,
then the matmul, conv and triad probes), nothing read from or written to the cache.

Printed per repeat: the child's wall time (start to exit, torch's import included), the probe's own time, its peak
resident memory (the child's ru_maxrss, from wait4), the triad's array size and why, and the figures measured.
`--llc-mib N` makes the child believe the last-level cache is N MiB (the Xeon of ../shared/hosts/ reports 260 MiB):
the triad is sized as it would be there, on this host's memory; the line says it is simulated.

    python scripts/bench_peak_probe.py --threads 2 --repeats 2
    python scripts/bench_peak_probe.py --llc-mib 260
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

CHILD = """
import json, sys, time
from hwprof.hardware import machine
llc = int(sys.argv[2])
if llc:
    machine.llc_bytes = lambda *args, **kwargs: llc * 2**20
t0 = time.perf_counter()
peaks = machine.measure(int(sys.argv[1]))
print(json.dumps({"probe_s": time.perf_counter() - t0, "gflops": peaks.gflops, "gbps": peaks.gbps,
                  "array_mib": (peaks.triad_array_bytes or 0) / 2**20, "capped_by": peaks.triad_capped_by,
                  "busy": peaks.busy_host}))
"""


def one(threads: int, llc_mib: int) -> dict[str, float | str | bool]:
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-P", "-c", CHILD, str(threads), str(llc_mib)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"bench_peak_probe: the probe's child exited {child.returncode}")
    figures = json.loads(out)
    return {**figures, "wall_s": time.perf_counter() - started, "max_rss_mb": usage.ru_maxrss / 1024}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--llc-mib", type=int, default=0, help="simulate a last-level cache of this size")
    args = parser.parse_args()
    where = f"LLC simulated at {args.llc_mib} MiB" if args.llc_mib else "this host's LLC"
    print(f"peak probe, {args.threads} threads, {where}, load {os.getloadavg()[0]:.2f}")
    for i in range(args.repeats):
        r = one(args.threads, args.llc_mib)
        cap = f", capped by {r['capped_by']}" if r["capped_by"] else ""
        print(
            f"  {i + 1}: child {r['wall_s']:.1f} s (probe {r['probe_s']:.1f} s), peak RSS {r['max_rss_mb']:,.0f} MB, "
            f"triad 3x{r['array_mib']:.0f} MiB{cap}; {r['gflops']:.1f} GFLOP/s, {r['gbps']:.1f} GB/s"
            + (" (busy host: not a quiet figure)" if r["busy"] else "")
        )
    print(f"  load after {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
