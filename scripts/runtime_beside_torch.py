"""OpenVINO's infer() latency alone and right after a torch op, in one process: what torch's OpenMP pool, woken by
the pipeline's own torch work (a preprocess's division, NMS), costs the next runtime's forward while its threads
still spin.

    python scripts/runtime_beside_torch.py MODEL.onnx [--precision bf16] [--threads 2] [--iters 60]
    OMP_WAIT_POLICY=PASSIVE python scripts/runtime_beside_torch.py MODEL.onnx    # the pool sleeps at once

MODEL.onnx: any run's exported model (a run with an OpenVINO or ONNX Runtime pass or advise row keeps one under
model/ or advise/<key>/work/variant/model/). Prints, twice, the median latency of infer() alone and of infer()
right after a parallel torch op (x / 255 on a 3x640x640 tensor), with the same compile options as hwprof's
OpenVINO runtime.
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("onnx")
    parser.add_argument("--precision", default="bf16", choices=["f32", "bf16"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--iters", type=int, default=60)
    args = parser.parse_args()

    import numpy as np
    import openvino as ov
    import torch

    torch.set_num_threads(args.threads)
    options = {
        "INFERENCE_NUM_THREADS": args.threads,
        "NUM_STREAMS": 1,
        "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_PRECISION_HINT": args.precision,
    }
    compiled = ov.Core().compile_model(args.onnx, "CPU", options)
    request = compiled.create_infer_request()
    x = np.random.default_rng(0).random(list(compiled.inputs[0].shape), dtype=np.float32)
    image = torch.rand(1, 3, 640, 640)

    def median_ms(torch_before: bool) -> float:
        times = []
        for _ in range(args.iters):
            if torch_before:
                (image / 255.0).sum()
            start = time.perf_counter()
            request.infer({0: x})
            times.append(time.perf_counter() - start)
        return statistics.median(times[10:]) * 1e3

    for _ in range(2):
        print(f"infer alone {median_ms(False):.2f} ms; right after a torch op {median_ms(True):.2f} ms")


if __name__ == "__main__":
    main()
