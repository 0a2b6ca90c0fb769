"""Layer N's time and kernel share with and without the allocator candidates (issue 38's "before and after").

For each malloc setting of `hwprof advise`'s allocator candidates (glibc's default, malloc-keep, and jemalloc and
tcmalloc where installed), one real `hwprof collect` of the model with the kernels pass (perf sampling, all
threads) and the layers pass, run with that setting's environment; the settings alternate when repeated. Prints
per run: the forward p50 of the timing pass, layer N's time (layers pass), layer N's and forward's share of
samples in the kernel, and the page-fault finding's title if the run has one.

    python scripts/allocator_kernel_share.py --model yolov7 --imgsz 640 --layer 0
    python scripts/allocator_kernel_share.py --model yolov7-tiny --imgsz 320 --repeats 2 --out /tmp/alloc-share

--advised RUN instead reads an advised run: layer N's time in advise's baseline layers collect and in each
candidate's (advise/<key>/layers), and each candidate's faults per iteration, without collecting anything:

    python scripts/allocator_kernel_share.py --advised results/<run-id> --layer 0
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from hwprof.analysis.advice_candidates import GLIBC_KEEP_FREED, KEEP_FREED_ENV
from hwprof.analysis.run_analysis import analyse
from hwprof.core.kernels import KIND_KERNEL
from hwprof.hardware.malloc_libs import find_malloc_libs
from hwprof.rundir.reader import RunData


def settings() -> list[tuple[str, dict[str, str]]]:
    out = [("default", {}), ("malloc-keep", dict(GLIBC_KEEP_FREED))]
    for name, path in find_malloc_libs().items():
        if path:
            out.append((name, {"LD_PRELOAD": path, **KEEP_FREED_ENV.get(name, {})}))
    return out


def summary(run: Path, layer: int) -> str:
    a = analyse(RunData.load(run))
    forward = a.stages.get("forward")
    row = next((r for r in a.layers.top_level if r.index == layer), None)
    native = a.layers.native
    parts = [f"forward p50 {forward.p50_ms:.1f} ms" if forward else "forward -"]
    if a.stages.disturbed:
        parts.append(f"DISTURBED ({a.stages.disturbed})")
    if row is not None:
        parts.append(f"layer {layer} {row.time_ms:.2f} ms" if row.time_ms is not None else f"layer {layer} -")
        if row.native is not None:
            parts.append(f"layer {layer} kernel share {100 * row.native.kinds.get(KIND_KERNEL, 0.0):.0f}%")
    if native is not None:
        parts.append(f"forward kernel share {100 * native.forward.kinds.get(KIND_KERNEL, 0.0):.1f}%")
    faults = [f.title for f in a.findings if f.topic == "kernel-faults"]
    return "; ".join([*parts, f"finding: {faults[0]}" if faults else "no kernel-faults finding"])


def advised(run: Path, layer: int) -> int:
    from hwprof.analysis.advice import load_advice

    def layer_ms(d: Path) -> str:
        row = next((r for r in analyse(RunData.load(d)).layers.top_level if r.index == layer), None)
        return f"{row.time_ms:.2f} ms" if row is not None and row.time_ms is not None else "-"

    advice, error = load_advice(run)
    if advice is None:
        print(f"{run}: no advice.json ({error or 'run hwprof advise first'})", file=sys.stderr)
        return 2
    base = run / "advise" / "baseline-layers"
    before = layer_ms(base) if (base / "run.json").is_file() else "-"
    for row in advice.rows:
        layers = run / "advise" / row.key / "layers"
        after = layer_ms(layers) if (layers / "run.json").is_file() else "-"
        f = row.forward
        speed = f"forward {f.ratio:.2f}x ({f.spread_text()}, {f.before_ms:.1f}->{f.after_ms:.1f} ms)" if f else ""
        faults = f"faults/iter {row.minor_faults[0]:,.0f}->{row.minor_faults[1]:,.0f}" if row.minor_faults else ""
        print(f"{row.key:12} {row.status:8} {speed} layer {layer} {before}->{after} {faults} {row.reason}")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="yolov7")
    p.add_argument("--imgsz", type=int, default=640)
    p.add_argument("--layer", type=int, default=0)
    p.add_argument("--repeats", type=int, default=1, help="rounds over the settings, alternating")
    p.add_argument("--only", default="timing,flops,perf_sampling", help="the collectors of each collect")
    p.add_argument("--out", type=Path, default=Path("results/allocator-share"))
    p.add_argument("--advised", type=Path, help="read this advised run instead of collecting")
    args, extra = p.parse_known_args()
    if args.advised:
        return advised(args.advised, args.layer)
    lines = []
    for r in range(args.repeats):
        for name, env in settings():
            out = args.out / f"{name}-{r}"
            command = [sys.executable, "-m", "hwprof", "collect", "--model", args.model, "--imgsz", str(args.imgsz)]
            command += ["--only", args.only, "--no-report", "--out", str(out), *extra]
            print(f"{name} round {r}: {' '.join(f'{k}={v}' for k, v in env.items())} {' '.join(command)}", flush=True)
            done = subprocess.run(command, env={**os.environ, **env}, check=False)
            result = summary(out, args.layer) if (out / "run.json").is_file() else f"collect exited {done.returncode}"
            lines.append(f"{name:12} round {r}: {result}")
            print(lines[-1], flush=True)
    print("\n".join(["", *lines]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
