"""GPU roofline per layer from Nsight Compute's measured traffic and FLOPs against measured GPU peaks.

Inputs are the ncu collector's per-layer table (collectors/gpu/ncu/layers.py) and the peaks
(hwprof.gpu_peaks). Per layer:
- FLOPs: ncu's SASS FP32 count (2 x FFMA + FADD + FMUL, kernel replay). Work on the tensor pipe is
  not in it (ncu counts tensor instructions, not their FLOPs), so for a layer with tensor-pipe work
  the intensity and the achieved FLOP/s are lower bounds;
- bytes: DRAM read + written in application-range replay (warm caches, the layer's kernels back to
  back as in the forward) where it was measured, else kernel replay's cold-cache bytes (caches
  flushed before every kernel: an upper bound on the forward's traffic), and the row says which;
- time: the sum of the layer's kernel-replay durations.
Roofs: the FP32 matmul peak (non-tensor FP32 work) and the device-to-device copy bandwidth (read +
write). Below the ridge (peak FLOP/s / peak B/s) a layer is memory-bound by its measured traffic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

WARM = "app-range replay (warm caches)"
COLD = "kernel replay (cold caches)"


@dataclass(frozen=True)
class GpuRoof:
    peak_tflops: float
    peak_gbps: float
    compute_label: str = "matmul fp32 (no tensor cores)"
    bandwidth_label: str = "device-to-device copy, read + write"

    @property
    def ridge(self) -> float:
        """FLOP per byte where the two roofs meet."""
        return self.peak_tflops * 1e12 / (self.peak_gbps * 1e9)


@dataclass
class GpuRoofRow:
    layer: str
    flops: float
    bytes: float
    bytes_source: str
    kernel_ns: float
    tensor_inst: float
    intensity: float | None
    achieved_tflops: float | None
    achieved_gbps: float | None
    attainable_tflops: float | None
    bound: str
    sm_pct: float | None
    mem_pct: float | None
    roof_share: float | None = None
    """Achieved share of the roof that bounds the layer (bandwidth roof if memory-bound, else compute)."""

    @property
    def lower_bound(self) -> bool:
        """Tensor-pipe work is not in the FLOPs: intensity and FLOP/s are lower bounds."""
        return self.tensor_inst > 0


def roofline_rows(layers: dict[str, dict[str, float]], roof: GpuRoof) -> list[GpuRoofRow]:
    rows = []
    for layer, m in layers.items():
        if "dram_read_bytes_warm" in m:
            nbytes, source = m["dram_read_bytes_warm"] + m.get("dram_write_bytes_warm", 0.0), WARM
        elif "dram_read_bytes_cold" in m:
            nbytes, source = m["dram_read_bytes_cold"] + m.get("dram_write_bytes_cold", 0.0), COLD
        else:
            continue
        flops = m.get("fp32_flops", 0.0)
        ns = m.get("kernel_replay_ns", 0.0)
        intensity = flops / nbytes if nbytes > 0 else None
        attainable = min(roof.peak_tflops, intensity * roof.peak_gbps * 1e9 / 1e12) if intensity is not None else None
        if intensity is None:
            bound = "no DRAM traffic measured"
        elif intensity < roof.ridge:
            bound = "memory" if m.get("tensor_inst", 0.0) == 0 else "memory (by a lower-bound intensity)"
        else:
            bound = "compute"
        achieved_tflops = flops / ns / 1e3 if ns > 0 else None
        achieved_gbps = nbytes / ns if ns > 0 else None
        if bound.startswith("memory") and achieved_gbps is not None:
            share: float | None = achieved_gbps / roof.peak_gbps
        elif bound == "compute" and achieved_tflops is not None:
            share = achieved_tflops / roof.peak_tflops
        else:
            share = None
        rows.append(
            GpuRoofRow(
                layer=layer,
                flops=flops,
                bytes=nbytes,
                bytes_source=source,
                kernel_ns=ns,
                tensor_inst=m.get("tensor_inst", 0.0),
                intensity=intensity,
                achieved_tflops=achieved_tflops,
                achieved_gbps=achieved_gbps,
                attainable_tflops=attainable,
                bound=bound,
                sm_pct=m.get("sm_throughput_pct"),
                mem_pct=m.get("mem_throughput_pct"),
                roof_share=share,
            )
        )
    rows.sort(key=lambda r: int(r.layer.split(".")[-1]) if r.layer.split(".")[-1].isdigit() else 1 << 30)
    return rows


def roofline_summary(rows: list[GpuRoofRow], roof: GpuRoof) -> dict[str, Any]:
    return {
        "peak_tflops": roof.peak_tflops,
        "peak_gbps": roof.peak_gbps,
        "ridge_flop_per_byte": roof.ridge,
        "compute_roof": roof.compute_label,
        "bandwidth_roof": roof.bandwidth_label,
        "bytes_source": sorted({r.bytes_source for r in rows}),
        "memory_bound_layers": [r.layer for r in rows if r.bound.startswith("memory")],
    }
