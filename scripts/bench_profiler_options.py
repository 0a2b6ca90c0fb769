#!/usr/bin/env python
"""Where torch.profiler's own cost goes: each of its options switched off alone, paired in one process.

For each option set, hwprof.session.paired.abba_forward runs the layers pass's set-up (layer markers on
throughout) with the torch_profiler collector started only in the "on" iterations of ABBA blocks
(off, on, on, off): ratio per block = forward time with the profiler / without, median over
blocks. The option sets (RunConfig.extra entries the collector reads):
  default        the collector as the trace pass runs it, except that oneDNN verbose is on in
                 every "on" iteration (abba_forward calls no after_iteration, which switches it
                 off after the first measured iteration in the pass): each option's cost per
                 iteration
  no-onednn      without oneDNN's verbose lines (onednn_verbose=False)
  no-flops       without with_flops (record_shapes stays on)
  no-shapes      without record_shapes (and so without with_flops)
  bare           none of the three: Kineto's aten ops and the per-marker ranges only
  no-ranges      bare, and no record_function range per marker (ops then have no layer)
With --rounds N the sets are run N times, interleaved, and the median block ratios pooled.
Measured on a shared 2-core host (median block ratio, 3 rounds of 8 pairs, yolov7-tiny at 320):
default 1.22, no-onednn 1.17, no-flops 1.21, no-shapes 1.22, bare 1.13, no-ranges 1.03 with the
ranges through the record_function ops; with _RecordFunctionFast (2 rounds): default 1.16,
no-onednn 1.08, bare 1.06, no-ranges 1.01. yolov7 at 640 (1 round of 4 pairs): every set within
1.0-1.07, i.e. within the noise. The allocator's events (profile_memory) were measured here too while the trace pass
carried them (issue 59: yolov7-tiny at 320, 3 rounds of 8 pairs, 1.127 with against 1.119 without); they moved to
the layers pass (collectors/torch_profiler/memory_collector.py; measured by scripts/bench_attributing_passes.py
--methods new,no-memory).

    python scripts/bench_profiler_options.py --model yolov7-tiny --imgsz 320 --pairs 8 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from hwprof.collectors.base import Collector
from hwprof.collectors.torch_profiler.collector import TorchProfilerCollector

from hwprof.core.config import RunConfig
from hwprof.session.paired import abba_forward

OFF: dict[str, Any] = {"onednn_verbose": False, "profiler_flops": False, "profiler_shapes": False}
OPTION_SETS: dict[str, dict[str, Any]] = {
    "default": {},
    "no-onednn": {"onednn_verbose": False},
    "no-flops": {"profiler_flops": False},
    "no-shapes": {"profiler_flops": False, "profiler_shapes": False},
    "bare": OFF,
    "no-ranges": {**OFF, "profiler_ranges": False},
}


def profiler(config: RunConfig) -> list[Collector]:
    return [TorchProfilerCollector(config)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="yolov7-tiny")
    parser.add_argument("--imgsz", type=int, default=320)
    parser.add_argument("--pairs", type=int, default=8, help="on/off pairs per option set (2 per ABBA block)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--only", default="", help="comma-separated option sets")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    wanted = [s for s in args.only.split(",") if s] or list(OPTION_SETS)
    unknown = set(wanted) - set(OPTION_SETS)
    if unknown:
        parser.error(f"unknown option set {', '.join(sorted(unknown))}; known: {', '.join(OPTION_SETS)}")
    base = RunConfig(model=args.model, imgsz=args.imgsz, warmup=args.warmup, iters=2 * args.pairs)
    print(f"{args.model} at {args.imgsz}, {args.pairs} pairs, {base.threads} threads, {args.rounds} round(s)")
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in wanted}
    for k in range(args.rounds):
        for name in wanted:
            config = replace(base, extra={**base.extra, **OPTION_SETS[name]})
            out = abba_forward(config, profiler, args.pairs).to_dict()
            results[name].append(out)
            print(
                f"  round {k + 1} {name:10s} off p50 {out['forward_p50_off_ms']:7.1f} ms, on p50 "
                f"{out['forward_p50_on_ms']:7.1f} ms, median block ratio {out['ratio_median_block']:.3f} "
                f"({out['statuses']['torch_profiler']})",
                flush=True,
            )
    print(f"\n{'options':10s} {'median block ratio':>19s} {'block ratio range':>19s} {'added ms (p50)':>15s}")
    summary = {}
    for name, outs in results.items():
        blocks = [r for out in outs for r in out["ratio_blocks"]]
        added = statistics.median(out["forward_p50_on_ms"] - out["forward_p50_off_ms"] for out in outs)
        summary[name] = {"ratio_median_block": statistics.median(blocks), "blocks": blocks, "added_ms": added}
        print(f"{name:10s} {statistics.median(blocks):19.3f} {min(blocks):9.3f}-{max(blocks):<9.3f} {added:15.1f}")
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args), "sets": summary, "runs": results}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
