"""Page faults per forward-sized allocation under each malloc setting of the allocator candidates.

Each setting runs in a process of its own (the environment must be there before the process starts): torch
allocates and fills a block of layer 0's output size (yolov7 at 640: 52 MB) and an 8 MB one, frees both, and
counts the minor faults (getrusage) per round after a few rounds of warm-up. A setting that keeps freed memory
faults about 0 times a round; glibc's default mmaps the 52 MB block anew each round and faults every page of it.
Each child also says whether its replacement malloc is mapped (/proc/self/maps): the LD_PRELOAD took.

    python scripts/malloc_faults.py               # the settings of hwprof.analysis.advice.candidates
    python scripts/malloc_faults.py --mb 13 --rounds 100
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from hwprof.analysis.advice.candidates import GLIBC_KEEP_FREED, KEEP_FREED_ENV
from hwprof.hardware.malloc_libs import find_malloc_libs

CHILD = r"""
import json, resource, sys, torch
torch.set_num_threads(1)
mb, rounds = float(sys.argv[1]), int(sys.argv[2])
def faults(n):
    start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(n):
        a = torch.empty(int(mb * 2**20) // 4); a.fill_(1.0)
        b = torch.empty(8 * 2**20 // 4); b.fill_(1.0)
        del a, b
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start) / n
faults(10)
maps = open("/proc/self/maps").read()
print(json.dumps({"faults": faults(rounds), "mapped": [n for n in ("jemalloc", "tcmalloc") if n in maps]}))
"""


def settings(libs: dict[str, str]) -> list[tuple[str, dict[str, str]]]:
    out: list[tuple[str, dict[str, str]]] = [
        ("glibc default", {}),
        ("glibc mmap_threshold=32 MiB (the cap)", {"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=33554432"}),
        ("glibc keep freed (malloc-keep)", dict(GLIBC_KEEP_FREED)),
    ]
    for name, path in libs.items():
        if path:
            out.append((f"{name} default", {"LD_PRELOAD": path}))
            out.append((f"{name} keep freed ({name})", {"LD_PRELOAD": path, **KEEP_FREED_ENV.get(name, {})}))
        else:
            print(f"{name}: not installed, skipped", file=sys.stderr)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mb", type=float, default=52.0, help="the large block's size in MiB (layer 0's output)")
    p.add_argument("--rounds", type=int, default=40)
    args = p.parse_args()
    print(f"{'setting':42} {'faults/round':>12}  mapped")
    for name, env in settings(find_malloc_libs()):
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(args.mb), str(args.rounds)],
            capture_output=True,
            text=True,
            env={**os.environ, **env},
            check=True,
        )
        got = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{name:42} {got['faults']:12.0f}  {','.join(got['mapped']) or '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
