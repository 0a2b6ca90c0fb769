"""The candidate changes of a run on an NVIDIA GPU (`hwprof advise` on a CUDA run): CUDA graphs, torch.compile's
reduce-overhead, half precisions, channels_last and larger batches, each tied to the finding it answers
(hwprof.analysis.advice.candidates.tie_findings); without a GPU here their figures come from the recordings
(hwprof.analysis.gpu.advice)."""

from __future__ import annotations

from hwprof.analysis.advice.candidate import Candidate, RunFacts, Variant

GPU_BATCHES = (8, 32)
"""Batch sizes tried when the GPU waits for the CPU (the recorded H100 experiments' points)."""


def gpu_candidates(facts: RunFacts) -> list[Candidate]:
    out = [
        Candidate(
            "cuda-graph",
            "the forward captured once as a CUDA graph and replayed (no per-kernel launch from Python)",
            "code: g = torch.cuda.CUDAGraph(); with torch.cuda.graph(g): out = model(static_input); g.replay()",
            ("launch-bound", "small-launches"),
            cuda_graph=True,
        ),
        Candidate(
            "compile-reduce-overhead",
            "torch.compile mode 'reduce-overhead' (Inductor kernels replayed as CUDA graphs)",
            'code: model = torch.compile(model, mode="reduce-overhead")',
            ("launch-bound", "small-launches"),
            compile_mode="reduce-overhead",
        ),
    ]
    if facts.precision == "fp32":
        for precision in ("fp16", "bf16"):
            out.append(
                Candidate(
                    precision,
                    f"the model and input in {precision} (tensor-core math)",
                    f"--precision {precision}",
                    ("no-tensor-cores", "layout-transposes", "launch-bound"),
                    Variant(precision=precision),
                )
            )
    if not facts.channels_last:
        out.append(
            Candidate(
                "channels_last",
                "model and input in channels_last (NHWC): no cuDNN NCHW<->NHWC transposes",
                "--channels-last",
                ("layout-transposes",),
                Variant(channels_last=True),
            )
        )
    for batch in GPU_BATCHES:
        if batch > facts.batch:
            out.append(
                Candidate(
                    f"batch-{batch}",
                    f"batch {batch} instead of {facts.batch} (time per image): the GPU stops waiting for the CPU",
                    f"--batch {batch}",
                    ("launch-bound", "small-launches"),
                    Variant(batch=batch),
                )
            )
    return out
