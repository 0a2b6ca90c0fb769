"""An Advice built by hand for the render tests: one row of every kind the table must show (a ranked
paired row with layers and its output check, a compiled row with setup time, a changed-output row, a
pass-level row, a not-run and a failed row) and the ABBA blocks of the two paired rows.

The figures are test inputs, not measurements: the tests check that what is written is what is shown.
"""

from __future__ import annotations

from hwprof.analysis.advice.speedup import Speedup
from hwprof.analysis.advice.table import (
    CHANGED_OUTPUT,
    FAILED,
    NOT_RUN,
    Advice,
    AdviceBlock,
    AdviceRow,
    LayerDelta,
    OutputCheck,
)
from hwprof.analysis.paired_cost import PAIRED, PASS_LEVEL

PAIRED_KEYS = ("channels_last", "compile")
BLOCKS_PER_KEY = 2
ITERATION_NS = 60_000_000
FORWARD_NS = 48_000_000


def sample_rows() -> list[AdviceRow]:
    same = OutputCheck(0.0031, 14.2, 40, 40, 12, 12, 12)
    return [
        AdviceRow(
            "channels_last",
            "the model and its input in channels_last memory format",
            "--channels-last",
            "22 data-movement layers take 27.6 ms where 5.9 ms would do",
            forward=Speedup(PAIRED, 1.2734, 1.2111, 1.3048, 1.18, 1.33, 6, 61.24, 48.31),
            end_to_end=Speedup(PAIRED, 1.2034, 1.1512, 1.2377, 1.10, 1.26, 6, 80.12, 66.84),
            output=same,
            layers=[
                LayerDelta(2, "C2f", 5.1, 3.2),
                LayerDelta(7, "Conv", 4.0, 3.1),
                LayerDelta(9, "SPPF", 2.0, 2.4),
            ],
            variant_run="advise/channels_last",
        ),
        AdviceRow(
            "compile",
            "torch.compile (Inductor, mode default)",
            "model = torch.compile(model)",
            "the forward runs at 53% of the host's peak",
            forward=Speedup(PAIRED, 1.4512, 1.4023, 1.5187, 1.39, 1.55, 6, 61.24, 42.2),
            end_to_end=Speedup(PAIRED, 1.3301, 1.2907, 1.3655, 1.27, 1.38, 6, 80.12, 60.23),
            setup_s=41.3,
            setup_what="compile",
            output=OutputCheck(0.00042, 14.2, 40, 40, 12, 12, 12),
            layers_note="Inductor fuses across layers: no per-layer times",
        ),
        AdviceRow(
            "openvino-bf16",
            "OpenVINO in bf16",
            "--runtime openvino --precision bf16",
            "the forward runs at 53% of the host's peak",
            status=CHANGED_OUTPUT,
            reason="4 of 12 detections unmatched (33%, tolerance 1%)",
            forward=Speedup(PAIRED, 2.1093, 2.0311, 2.2046, 1.98, 2.25, 6, 61.24, 29.03),
            output=OutputCheck(0.87, 14.2, 40, 35, 12, 9, 8),
            setup_s=6.2,
            setup_what="export + convert",
        ),
        AdviceRow(
            "omp-passive",
            "OpenMP threads sleep when idle",
            "OMP_WAIT_POLICY=passive hwprof collect ...",
            "the OpenMP runtime takes 31% of layer 0's samples",
            forward=Speedup(PASS_LEVEL, 1.0417, None, None, 0.9811, 1.0923, 0, 61.24, 58.79),
        ),
        AdviceRow(
            "amx-int8",
            "int8 on AMX units",
            "--runtime openvino --precision int8",
            "the forward runs at 53% of the host's peak",
            status=NOT_RUN,
            reason="the host has no AMX units (host line: avx512_bf16 avx512_vnni)",
        ),
        AdviceRow(
            "onnxruntime",
            "ONNX Runtime fp32",
            "--runtime onnxruntime",
            "the forward runs at 53% of the host's peak",
            status=FAILED,
            reason="export failed: torch.onnx.export raised UnsupportedOperatorError",
        ),
    ]


def sample_blocks(start_ns: int) -> list[AdviceBlock]:
    """ABBA blocks from start_ns on: per block baseline, variant, variant, baseline; the iterations of
    each side numbered 2b, 2b+1 (as paired_speedup reads them)."""
    out = []
    t = start_ns
    for key in PAIRED_KEYS:
        for b in range(BLOCKS_PER_KEY):
            for n, side in enumerate(("baseline", "variant", "variant", "baseline")):
                it = 2 * b + (n in (2, 3))
                gap = 1_000_000
                out.append(AdviceBlock(key, side, b, it, t, t + ITERATION_NS, t + gap, t + gap + FORWARD_NS))
                t += ITERATION_NS + 500_000 * (n + 1)
            t += 5_000_000
    return out


def sample_advice(start_ns: int) -> Advice:
    blocks = sample_blocks(start_ns)
    return Advice(
        "--model yolov8n --imgsz 256 --threads 2",
        "cpu",
        sample_rows(),
        blocks,
        blocks[0].start_ns,
        blocks[-1].end_ns,
        312.4,
        notes=["the compile cache was cold: the compile time is a first compile's"],
    )
