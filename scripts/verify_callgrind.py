"""The callgrind pass checked against itself and against plain callgrind.

For each model: two `hwprof collect --counters callgrind` runs (the pass's wall time, per-layer
instruction counts of both and their spread, the marker floor, layers + gap = forward), then the
same forward under plain callgrind with no markers and no hooks (instrumentation on around one
forward after a warm one), whose instruction count the pass's forward should match up to the
markers' own cost (markers x floor).

    python scripts/verify_callgrind.py --models yolov7-tiny,yolov8n --imgsz 320
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from hwprof.collectors.callgrind.parse import read_parts
from hwprof.collectors.callgrind.tool import callgrind_command, find_valgrind

from hwprof.schema.records import MetricTables

PLAIN = """
import sys, torch
from pathlib import Path
from hwprof.core.config import RunConfig
from hwprof.collectors.callgrind import client_requests as vc
from hwprof.workload.images import discover
from hwprof.core.markers import MarkerBus
from hwprof.workload.pipeline import Pipeline
from hwprof.workload.zoo import build_model
model, imgsz, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
built = build_model(model)
batch = Pipeline(RunConfig(model=model, imgsz=imgsz), MarkerBus(), discover(None).paths, built).sample_batch()
vc.start_instrumentation()
with torch.inference_mode():
    built.module(batch)
    vc.zero_stats()
    built.module(batch)
    vc.dump_stats_at("forward")
vc.stop_instrumentation()
"""


def collect(model: str, imgsz: int, threads: int, out: Path) -> dict[str, Any]:
    command = [sys.executable, "-m", "hwprof", "collect", "--model", model, "--imgsz", str(imgsz)]
    command += ["--threads", str(threads), "--counters", "callgrind", "--only", "timing,callgrind"]
    command += ["--iters", "1", "--warmup", "1", "--no-report", "--out", str(out)]
    subprocess.run(command, check=True, capture_output=True, text=True)
    run = json.loads((out / "run.json").read_text())
    tables = MetricTables.load(out / "passes" / "callgrind" / "callgrind.metrics.json")
    return {"run": run, "layers": {k: v["instructions"] for k, v in tables.layers.items()}}


def plain_forward(model: str, imgsz: int, threads: int, work: Path) -> int:
    valgrind, why = find_valgrind()
    if valgrind is None:
        raise SystemExit(f"no usable valgrind: {why}")
    script = work / "plain.py"
    script.write_text(PLAIN)
    out = work / f"plain-{model}.out"
    command = callgrind_command(valgrind, out, [sys.executable, "-P", str(script), model, str(imgsz), str(threads)])
    subprocess.run(command, check=True, capture_output=True, text=True)
    return next(p.totals["Ir"] for p in read_parts(out) if p.label == "forward")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="yolov7-tiny,yolov8n")
    parser.add_argument("--imgsz", type=int, default=320)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("results/verify-callgrind.json"))
    args = parser.parse_args()
    report = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for model in [m for m in args.models.split(",") if m]:
            first, second = (collect(model, args.imgsz, args.threads, work / f"{model}-{k}") for k in (1, 2))
            summary = first["run"]["collectors"]["callgrind"]["summary"]
            spread = {
                layer: second["layers"][layer] - count
                for layer, count in first["layers"].items()
                if layer in second["layers"]
            }
            closure = summary["checks"]["layers_plus_gap_vs_forward"]["instructions"]
            plain = plain_forward(model, args.imgsz, args.threads, work)
            markers = 2 * len(first["layers"]) + 2  # layer B/E and the forward stage's own B/E
            row = {
                "pass_wall_s": [r["run"]["passes"]["callgrind"]["wall_s"] for r in (first, second)],
                "timing_forward_p50_ms": first["run"]["passes"]["timing"].get("forward_p50_ms"),
                "forward_instructions": [
                    summary["instructions_forward"],
                    second["run"]["collectors"]["callgrind"]["summary"]["instructions_forward"],
                ],
                "layer_spread_max_abs": max(abs(v) for v in spread.values()),
                "layer_spread_max_rel": max(abs(v) / first["layers"][k] for k, v in spread.items()),
                "layers_identical": sum(1 for v in spread.values() if v == 0),
                "layers": len(spread),
                "marker_floor": summary["marker_floor"],
                "closure": closure,
                "plain_forward_instructions": plain,
                "pass_minus_plain": summary["instructions_forward"] - plain,
                "markers_in_forward": markers,
                "pass_minus_plain_per_marker": (summary["instructions_forward"] - plain) / markers,
            }
            report[model] = row
            print(model, json.dumps(row, indent=1, default=str))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
