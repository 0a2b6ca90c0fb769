"""One advise candidate's paired worker, run as `hwprof advise` runs it, with each side's figures printed.

For the guards of issue 38: per side, its forward p50 in the ABBA blocks, its forward alone in the same process
(the baseline's before the variant is built, the variant's after the blocks) and how far the blocks lie outside
that (advice_rows.side_drift); each stage's p50; then the row hwprof makes of it (paired figure, or the note that
drops it) and, where end to end parts from the forward, the stage that moved.

    python scripts/advise_sides.py --model yolov7-tiny --imgsz 320 --runtime openvino          # pairing guard
    python scripts/advise_sides.py --model yolov7-tiny --imgsz 320 --runtime onnxruntime --precision int8
    python scripts/advise_sides.py --model yolov7 --imgsz 640 --channels-last --blocks 8

Options not given are the baseline's (torch fp32, NCHW, 2 threads). Figures on a loaded host are not quiet-host
figures: the script prints the other work on the CPUs during the worker (hwprof.perf.neighbours).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from hwprof.advisor.children import paired_command
from hwprof.analysis.advice_candidates import Candidate, Variant
from hwprof.analysis.advice_rows import measured_row, pairing_note, side_drift
from hwprof.analysis.neighbours import others_text
from hwprof.core.config import RunConfig
from hwprof.perf.neighbours import NeighbourWatch
from hwprof.rundir.advise_files import read_advise_result
from hwprof.schema.advise_result import AdviseSpec


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="yolov7-tiny")
    p.add_argument("--imgsz", type=int, default=320)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--runtime", default=None)
    p.add_argument("--precision", default=None)
    p.add_argument("--channels-last", action="store_true", default=None)
    p.add_argument("--blocks", type=int, default=8)
    p.add_argument("--warmup", type=int, default=3)
    args = p.parse_args()
    base = RunConfig(model=args.model, imgsz=args.imgsz, threads=args.threads)
    change = Variant(runtime=args.runtime, precision=args.precision, channels_last=args.channels_last)
    variant = dataclasses.replace(base, **change.overrides())  # type: ignore[arg-type]
    with tempfile.TemporaryDirectory(prefix="hwprof-advise-sides-") as tmp:
        work = Path(tmp)
        spec = AdviseSpec.of(
            key="sides", baseline=base.to_dict(), variant=variant.to_dict(), blocks=args.blocks, warmup=args.warmup,
            work_dir=str(work / "work"), mode="paired", out=str(work / "paired.json"),
        )  # fmt: skip
        watch = NeighbourWatch().start()
        proc = subprocess.run(paired_command(spec, work / "spec.json"), capture_output=True, text=True)
        load = watch.stop()
        if proc.returncode != 0:
            print(f"the worker failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}", file=sys.stderr)
            return 1
        result = read_advise_result(work / "paired.json")
    print(f"{variant.runtime} {variant.precision} channels_last={variant.channels_last} against torch fp32, "
          f"{args.model} {args.imgsz}, {args.threads} threads, {args.blocks} blocks; {others_text(load)}")  # fmt: skip
    for name, s in result.sides.items():
        solo = list((s.solo_forward_ms or {}).values())
        solo_text = f"{min(solo):.2f}-{max(solo):.2f}" if solo else "n/a"
        drift = side_drift(result, name)
        print(
            f"  {name:8} forward p50 {statistics.median(s.forward_ms.values()):8.2f} ms in the blocks, alone "
            f"{solo_text} ms, drift {drift if drift is None else round(drift, 3)}; iteration p50 "
            f"{statistics.median(s.iteration_ms.values()):.2f} ms"
        )
        for stage, ms in (s.stage_ms or {}).items():
            print(f"      {stage:12} p50 {statistics.median(ms.values()):8.2f} ms")
    row = measured_row(Candidate("sides", "sides", "", (), change), {"paired": result}, [])
    if row.forward is not None and row.end_to_end is not None:
        print(f"paired: forward {row.forward.ratio:.2f}x ({row.forward.spread_text()}), "
              f"end to end {row.end_to_end.ratio:.2f}x ({row.end_to_end.spread_text()})")  # fmt: skip
    print(pairing_note(result, args.threads) or "pairing guard: both sides within 1.10x of their time alone")
    moved = row.stages_moved
    print(moved.text() if moved else "end to end follows the forward")
    return 0


if __name__ == "__main__":
    sys.exit(main())
