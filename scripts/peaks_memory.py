"""Peak RSS of the machine-peaks probe (hwprof.hardware.machine.measure), in this process, alone.

    python scripts/peaks_memory.py [--threads 2] [--llc-mib 480]

--llc-mib makes the probe read that last-level cache size instead of sysfs's (a VM that reports 480 MiB
had the triad take 3 x 1,920 MiB before its arrays were bounded by memory). Prints the triad's arrays as
measured, the bandwidth figure and the process's peak RSS (getrusage ru_maxrss), which is what
`/usr/bin/time -v hwprof doctor --peaks --force` reports for the probe, less the CLI's imports. Memory
figures hold on a busy host; the GB/s figure does not.
"""

from __future__ import annotations

import argparse
import resource

from hwprof.hardware import machine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--llc-mib", type=float, default=None, help="the LLC size the probe reads (default: sysfs)")
    args = parser.parse_args()
    if args.llc_mib is not None:
        llc = int(args.llc_mib * 2**20)
        machine.llc_bytes = lambda *_: llc
    peaks = machine.measure(args.threads)
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"bandwidth {peaks.gbps:.2f} GB/s: {peaks.gbps_method}")
    array = getattr(peaks, "triad_array_bytes", None)
    if array is not None:
        print(f"triad arrays 3 x {array / 2**20:,.0f} MiB, capped by: {peaks.triad_capped_by or 'nothing'}")
    print(f"peak RSS of the probe's process: {peak_rss / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
