#!/usr/bin/env python3
"""Measure trace.pftrace against its targets: size vs Kineto's own JSON of the same pass (at most a
third), build time (under 10 s), and the load time in Perfetto's trace processor.

    python scripts/bench_trace_build.py RUN_DIR            # an existing run
    python scripts/bench_trace_build.py --collect          # collect one first (yolov7, 640, 20 iters):
        hwprof collect --model yolov7 --imgsz 640 --only torch_profiler,pyspy,timing --iters 20 --timeout 3600

The build is repeated (--repeat) and the best and median times printed; the machine's load average
is printed beside them because timings on a shared host are noisy.
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hwprof.trace.perfetto import build_trace
from hwprof.trace.processor import TraceSession, availability

SIZE_TARGET = 1 / 3
BUILD_TARGET_S = 10.0


def collect(args: argparse.Namespace) -> Path:
    out = Path(args.results) / f"bench-{args.model}-{time.strftime('%Y%m%d-%H%M%S')}"
    cmd = [
        sys.executable,
        "-m",
        "hwprof",
        "collect",
        "--model",
        args.model,
        "--imgsz",
        str(args.imgsz),
        "--only",
        "torch_profiler,pyspy,timing",
        "--iters",
        str(args.iters),
        "--out",
        str(out),
        "--no-report",
        "--timeout",
        "3600",  # the trace pass of yolov7 x 20 ran past the default 900 s on a busy 2-core VM
    ]
    print("collecting:", " ".join(cmd[2:]), flush=True)
    subprocess.run(cmd, check=True)
    return out


def kineto_json(run_dir: Path) -> tuple[Path | None, int]:
    """Kineto's raw chrome trace of the trace pass, and its uncompressed size."""
    for path in sorted((run_dir / "passes" / "trace").glob("*kineto*.json*")):
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as handle:
                return path, sum(len(chunk) for chunk in iter(lambda: handle.read(1 << 20), b""))
        return path, path.stat().st_size
    return None, 0


def tiny_trace(folder: Path) -> Path:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
    from perfetto.trace_builder.proto_builder import TraceProtoBuilder

    builder = TraceProtoBuilder()
    packet = builder.add_packet()
    packet.track_descriptor.uuid = 1
    packet.track_descriptor.name = "empty"
    path = folder / "tiny.pftrace"
    path.write_bytes(builder.serialize())
    assert pb.Trace.FromString(path.read_bytes()).packet
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", nargs="?", type=Path)
    parser.add_argument("--collect", action="store_true", help="collect a run first")
    parser.add_argument("--model", default="yolov7")
    parser.add_argument("--imgsz", type=int, default=640)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--results", default="results")
    parser.add_argument("--repeat", type=int, default=3, help="builds to time")
    args = parser.parse_args()
    if args.run_dir is None and not args.collect:
        parser.error("give RUN_DIR or --collect")
    run_dir = collect(args) if args.collect else args.run_dir
    if not (run_dir / "run.json").is_file():
        parser.error(f"{run_dir} is not a run directory (no run.json)")

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "trace.pftrace"
        times, cpu = [], []
        stats = None
        for _ in range(max(args.repeat, 1)):
            c0 = time.process_time()
            stats = build_trace(run_dir, out)
            cpu.append(time.process_time() - c0)
            times.append(stats.build_s)
        assert stats is not None
        kineto, kineto_bytes = kineto_json(run_dir)

        print(f"run                {run_dir}")
        print(f"host load average  {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
        categories = ", ".join(f"{k} {v}" for k, v in sorted(stats.slices_by_category.items()))
        print(f"slices             {stats.slices} ({categories}); perf samples {stats.perf_samples}")
        print(f"counter samples    {stats.counter_samples} on {stats.counter_tracks} tracks; packets {stats.packets}")
        print(f"trace size         {stats.size_bytes / 1e6:.2f} MB")
        if kineto is not None:
            ratio = stats.size_bytes / kineto_bytes
            verdict = "meets" if ratio <= SIZE_TARGET else "misses"
            print(f"kineto json        {kineto_bytes / 1e6:.2f} MB ({kineto.name})")
            print(f"size ratio         {ratio:.3f} of Kineto's JSON ({verdict} the target of <= {SIZE_TARGET:.3f})")
        else:
            print("kineto json        none in passes/trace (no torch_profiler in this run): no size ratio")
        best, median = min(times), statistics.median(times)
        verdict = "meets" if best < BUILD_TARGET_S else "misses"
        print(
            f"build time         best {best:.2f} s, median {median:.2f} s of {len(times)} "
            f"({verdict} the target of < {BUILD_TARGET_S:.0f} s); CPU time best {min(cpu):.2f} s"
        )

        state = availability()
        if not state.available:
            print(f"trace processor    {state.sentence()}")
            return 0
        with TraceSession(tiny_trace(Path(tmp))) as session:
            start_s = session.load_s
        with TraceSession(out) as session:
            load_s = session.load_s
            n = session.query("select count(*) as n from slice")[0]["n"]
        ui = state.engine.ui_version if state.engine else "?"
        print(
            f"trace processor    load {load_s:.2f} s (Perfetto UI {ui} wasm under Node; of which "
            f"start-up with an empty trace {start_s:.2f} s); {n} slices loaded"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
