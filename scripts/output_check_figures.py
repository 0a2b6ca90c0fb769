"""What the output check sees on a model without --weights, with the seeded init as it was and as it is now.

    python scripts/output_check_figures.py --model yolov7-tiny --imgsz 320            # scaled init (now)
    python scripts/output_check_figures.py --model yolov7-tiny --imgsz 320 --plain    # the seeded init alone

Prints, for the first batch of the default images: each convolution's output std (every --every-th), the
time the scaling took, the detection candidates before NMS at --conf, then per variant (torch bf16, torch
channels_last, ONNX Runtime fp32/int8, OpenVINO fp32/bf16, each where it can run) the runtime header's check
(hwprof.workload.runtime_artifacts.output_difference, the same code a collect runs): head max |Δ|, the head's
input sensitivity, the raw maps' max |Δ| and SQNR, and the verdict. Timings are of a possibly busy host.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

VARIANTS = (
    ("torch", "bf16", False),
    ("onnxruntime", "fp32", False),
    ("onnxruntime", "int8", False),
    ("openvino", "fp32", False),
    ("openvino", "bf16", False),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="yolov7-tiny")
    parser.add_argument("--imgsz", type=int, default=320)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--plain", action="store_true", help="the seeded init alone (as before the scaling)")
    parser.add_argument("--every", type=int, default=6, help="print every n-th convolution's std")
    parser.add_argument("--variants", default="all", help="comma list of runtime:precision[:cl], or 'none'")
    args = parser.parse_args()

    import dataclasses

    import torch

    from hwprof.core.config import RunConfig
    from hwprof.core.markers import MarkerBus
    from hwprof.schema.runtime_checks import verdict_text
    from hwprof.workload.images import discover
    from hwprof.workload.init_scale import calibration_batch, conv_output_std, keep_signal
    from hwprof.workload.pipeline import Pipeline
    from hwprof.workload.runtime import RuntimeUnavailable
    from hwprof.workload.runtime_artifacts import output_difference
    from hwprof.workload.runtimes import make_runtime
    from hwprof.workload.zoo import build_model

    torch.set_num_threads(args.threads)
    config = RunConfig(model=args.model, imgsz=args.imgsz, threads=args.threads)
    images = discover(None).paths
    with tempfile.TemporaryDirectory(prefix="hwprof-outcheck-") as tmp:
        run_dir = Path(tmp)

        def built_model():
            started = time.perf_counter()
            built = build_model(config.model, None, config.seed)
            seeded = time.perf_counter() - started
            batch, words = calibration_batch(config, images, built)
            if not args.plain:
                started = time.perf_counter()
                built.init = keep_signal(built.module, batch, words, config.model, config.seed, run_dir)
                return built, batch, seeded, time.perf_counter() - started
            return built, batch, seeded, 0.0

        built, batch, seeded_s, scale_s = built_model()
        print(f"{args.model} at {args.imgsz}, {'seeded init alone' if args.plain else built.init.text}")
        print(f"build (seeded init, fuse) {seeded_s:.2f} s, scaling {scale_s:.2f} s (busy host: indicative)")
        if not args.plain:
            again, _, _, _ = built_model()
            assert again.init is not None
            print(f"another process's build: the saved scales read and applied in {again.init.seconds:.3f} s")
        stds = conv_output_std(built.module, batch)
        print(
            "conv output std: "
            + ", ".join(f"{n.removesuffix('.conv')} {s:.2g}" for n, s in list(stds.items())[:: args.every])
        )
        print(f"last conv {list(stds)[-1]}: {list(stds.values())[-1]:.3g}")
        pipeline = Pipeline(config, MarkerBus(), images, built)
        with torch.inference_mode():
            out = built.module(batch)
        print(
            f"candidates before NMS at conf {config.conf}: {pipeline.count_candidates(out)}, "
            f"detections {pipeline.count_detections(out)}"
        )
        chosen = (
            VARIANTS
            if args.variants == "all"
            else []
            if args.variants == "none"
            else [(v.split(":")[0], v.split(":")[1], v.endswith(":cl")) for v in args.variants.split(",")]
        )
        for runtime_name, precision, channels_last in chosen:
            variant = dataclasses.replace(
                config, runtime=runtime_name, precision=precision, channels_last=channels_last
            )
            label = f"{runtime_name} {precision}{' channels_last' if channels_last else ''}"
            vbuilt, vbatch, _, _ = built_model()
            try:
                runtime = make_runtime(variant, vbuilt, run_dir, run_dir, profile=False)
                vpipeline = Pipeline(variant, MarkerBus(), images, vbuilt, runtime)
                runtime.prepare(vbatch)
                d = output_difference(vpipeline, runtime, vbatch)
            except (RuntimeUnavailable, ImportError) as exc:
                print(f"{label}: cannot run here: {exc}")
                continue
            if d.sensitivity_head is None:
                print(f"{label}: {d.reference}")
                continue
            sqnr = f"{d.sqnr_raw_db:.1f} dB" if d.sqnr_raw_db is not None else "-"
            print(
                f"{label}: head max|d| {d.max_abs_head:.3g} of max|ref| {d.max_abs_reference:.3g}, input sens. "
                f"{d.sensitivity_head:.3g}; raw max|d| {d.max_abs_raw:.3g} of {d.max_abs_raw_reference:.3g}, "
                f"input sens. "
                f"{d.sensitivity_raw:.3g}, SQNR {sqnr}; detections {d.detections} vs {d.detections_reference}; "
                f"{verdict_text(d.verdict, d.max_abs_head, d.sensitivity_head)}"
            )


if __name__ == "__main__":
    main()
