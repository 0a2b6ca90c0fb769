"""Measure a `hwprof sweep --ray` on a local Ray cluster and what moving run directories back costs.

    python scripts/ray_sweep_figures.py --nodes 2 --threads 1,2,1,2 --imgsz 64 [-- --only timing,flops]

Starts a head (measuring nothing) and N worker nodes declaring `hwprof: 1` with ray.cluster_utils, runs the
installed CLI against it, and prints: points, nodes, wall time, bytes shipped back (tar.gz and as written),
the time spent packing (worker), fetching and writing (driver), and from those per-point figures an
ESTIMATE of what a 100-node sweep of 2,000 points asks of its driver. On one machine the timings of the
points themselves mean nothing (the nodes share its cores); the transfer figures are what is measured.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ray.cluster_utils import Cluster


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--models", default="yolov8n")
    ap.add_argument("--threads", default="1,2", help="points: one per model and thread count")
    ap.add_argument("--imgsz", default="64")
    ap.add_argument("--out", type=Path, help="sweep folder (default: a temporary one)")
    ap.add_argument("collect", nargs="*", help="after --: collect options for every point")
    args = ap.parse_args()
    threads = args.threads.split(",")
    out = args.out or Path(tempfile.mkdtemp(prefix="ray-sweep-")) / "sweep"
    cluster = Cluster(initialize_head=True, connect=False, head_node_args={"num_cpus": 1})
    try:
        for _ in range(args.nodes):
            cluster.add_node(num_cpus=1, resources={"hwprof": 1})
        cluster.wait_for_nodes()
        command = [sys.executable, "-P", "-m", "hwprof", "sweep", "--ray", cluster.address, "--out", str(out),
                   "--models", args.models, "--threads", ",".join(threads), "--imgsz", args.imgsz,
                   "--warmup", "0", "--iters", "1", "--", *(args.collect or ["--only", "timing,flops"])]  # fmt: skip
        started = time.monotonic()
        proc = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "COLUMNS": "160"})
        wall = time.monotonic() - started
        driver_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    finally:
        cluster.shutdown()
    if proc.returncode != 0:
        print(proc.stdout, proc.stderr)
        return proc.returncode
    transfers = json.loads((out / "ray_transfer.json").read_text())
    n = len(transfers)
    shipped = sum(t["archive_bytes"] for t in transfers)
    written = sum(t["run_bytes"] for t in transfers)
    pack = sum(t["pack_s"] for t in transfers)
    driver = sum(t["fetch_s"] + t["unpack_s"] for t in transfers)
    rows = sum(t["row_s"] for t in transfers)
    collect = sum(t["collect_s"] for t in transfers)
    print(f"sweep folder: {out}")
    print(f"points {n}, nodes {args.nodes}, wall {wall:.1f} s (CLI start to end, Ray connect and node probes included)")
    print(f"shipped back: {shipped / 1e3:.1f} kB tar.gz ({shipped / n / 1e3:.1f} kB per point) of "
          f"{written / 1e3:.1f} kB written ({written / n / 1e3:.1f} kB per point); nothing left out")  # fmt: skip
    print(f"packing on the workers: {pack:.3f} s ({pack / collect:.2%} of the points' collect time)")
    print(f"fetching + writing on the driver: {driver:.3f} s ({driver / wall:.2%} of the sweep's wall time); "
          f"analysing runs into rows: {rows:.3f} s")  # fmt: skip
    print(
        f"driver peak RSS: {driver_rss / 2**20:.0f} MiB; "
        f"largest archive {max(t['archive_bytes'] for t in transfers) / 1e3:.1f} kB"
    )
    per_point, busy = shipped / n, (driver + rows) / n
    print("ESTIMATE, 100 nodes x 2,000 points, from these per-point figures (linear in points; the driver holds")
    print("one archive at a time, finished archives wait in the workers' object stores):")
    print(f"  into the driver over the sweep: {2000 * per_point / 1e6:.0f} MB; driver busy {2000 * busy:.0f} s")
    print(
        f"  at 100 points finishing together: {100 * per_point / 1e6:.1f} MB to fetch, "
        f"{100 * busy:.1f} s of driver time"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
