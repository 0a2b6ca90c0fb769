"""Which process of a command's tree holds its peak memory: run it, sample every process's RSS.

    python scripts/tree_rss.py [--every 0.2] -- hwprof collect --model yolov7 --out /tmp/y7

Samples the RSS of the command and each of its descendants every --every seconds (psutil) and prints,
at the end, each process's highest RSS with its command line, the largest first, and the highest sum
over the tree at one moment. `/usr/bin/time -v` gives the largest single process's peak (ru_maxrss of
the children) but not which one it was. Memory figures hold on a busy host.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass

import psutil


@dataclass
class Seen:
    cmdline: str
    peak_rss: int = 0


def sample(root: psutil.Process, seen: dict[int, Seen]) -> int:
    """Record each live process's RSS; the tree's total now."""
    total = 0
    for proc in [root, *root.children(recursive=True)]:
        try:
            rss = proc.memory_info().rss
            entry = seen.setdefault(proc.pid, Seen(" ".join(proc.cmdline())[:160]))
        except psutil.Error:
            continue
        entry.peak_rss = max(entry.peak_rss, rss)
        total += rss
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--every", type=float, default=0.2)
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    child = subprocess.Popen(command)
    root = psutil.Process(child.pid)
    seen: dict[int, Seen] = {}
    tree_peak = 0
    while child.poll() is None:
        tree_peak = max(tree_peak, sample(root, seen))
        time.sleep(args.every)
    print(f"exit {child.returncode}; the tree's highest total RSS at one sample: {tree_peak / 1e9:.2f} GB")
    for pid, entry in sorted(seen.items(), key=lambda kv: -kv[1].peak_rss)[: args.top]:
        print(f"{entry.peak_rss / 1e9:6.2f} GB  pid {pid}  {entry.cmdline}")
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
