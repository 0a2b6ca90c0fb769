"""GPU roofline per layer from Nsight Compute's measured traffic and FLOPs against measured GPU peaks.

Inputs are the ncu collectors' per-layer table (collectors/gpu/ncu/per_layer.py), the peaks
(hwprof.hardware.gpu_peaks) and, for warm caches, the layer's kernel time in a real forward (Kineto). Every point
pairs bytes and time of one cache state:
- warm: DRAM bytes of application-range replay (the layer's kernels back to back, caches as the forward
  leaves them) with the layer's kernel time in the real forward (torch.profiler, warm caches too). The
  app-range duration is not used: it is the range's wall time under ncu, CPU launch gaps included (on the
  H100 recording 53 to 548 times the layer's kernel time). Without a Kineto time the warm point has its
  intensity but no achieved rate;
- cold: DRAM bytes of kernel replay (caches flushed before every kernel) with the kernel-replay durations.
FLOPs: ncu's SASS FP32 count (2 x FFMA + FADD + FMUL, kernel replay), the same for both points. Work on
the tensor cores is not in it: where ncu's tensor-core math counters (HMMA/IMMA/GMMA) show some, the
intensity and FLOP/s are lower bounds; where they were not recorded, whether they are is unknown
(`lower_bound` None) and the row says so.
Roofs: the FP32 matmul peak (non-tensor FP32 work) and the device-to-device copy bandwidth (read +
write). Below the ridge (peak FLOP/s / peak B/s) a point is memory-bound by its measured traffic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

WARM = "app-range replay (warm caches)"
COLD = "kernel replay (cold caches)"
WARM_TIME = "kernel time in the real forward (torch.profiler)"
COLD_TIME = "kernel-replay durations"
NO_WARM_TIME = (
    "unavailable: the app-range duration includes CPU launch gaps (not a kernel time), and no torch.profiler "
    "trace of the same layers was given"
)
MEMORY = "memory"
COMPUTE = "compute"
MEMORY_LOWER_BOUND = "memory*"
"""Below the ridge by a lower-bound intensity: ncu counted tensor-core math that the FLOPs leave out."""
MEMORY_FP32_ONLY = "memory?"
COMPUTE_LOWER_BOUND = "compute*"
"""Above the ridge by FP32 FLOPs, with tensor-core math beside them: the achieved FLOP/s is a lower bound."""
COMPUTE_FP32_ONLY = "compute?"
"""Above the ridge by FP32 FLOPs, with tensor-core math not recorded: the achieved FLOP/s may be a lower bound."""
"""Below the ridge by FP32 FLOPs, with tensor-core math not recorded: a tensor-core layer could lie higher."""
MARKS = "* = tensor-core math (ncu) not in the FLOPs; ? = tensor-core math not recorded: FLOPs are SASS FP32 only"


def layer_index(name: str) -> str:
    """A top-level layer's index as the tables show it: "model.105" -> "105" (other names unchanged)."""
    return name.rsplit(".", 1)[-1] if name.startswith("model.") else name


def layer_order(name: str) -> tuple[int, str]:
    """Sort key: layers by index, names without one after them."""
    tail = name.rsplit(".", 1)[-1]
    return (int(tail), name) if tail.isdigit() else (1 << 30, name)


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
class RoofPoint:
    """One layer at one cache state: bytes and time measured under the same caches."""

    cache: str
    """"warm" or "cold"."""
    bytes: float
    bytes_source: str
    ns: float | None
    time_source: str
    intensity: float | None
    achieved_tflops: float | None
    achieved_gbps: float | None
    attainable_tflops: float | None
    bound: str
    roof_share: float | None = None
    """Achieved share of the roof that bounds the point (bandwidth roof if memory-bound, else compute)."""


@dataclass
class GpuRoofRow:
    layer: str
    flops: float
    tensor_math_inst: float | None
    """ncu's tensor-core math instructions (HMMA + IMMA + GMMA); None where not recorded."""
    warm: RoofPoint | None
    cold: RoofPoint | None
    sm_pct: float | None
    mem_pct: float | None

    @property
    def lower_bound(self) -> bool | None:
        """Tensor-core math is not in the FLOPs: True where ncu counted some (intensity and FLOP/s are
        lower bounds), False where it counted none, None where it was not recorded."""
        return None if self.tensor_math_inst is None else self.tensor_math_inst > 0

    @property
    def points(self) -> list[RoofPoint]:
        return [p for p in (self.warm, self.cold) if p is not None]

    @property
    def timed(self) -> RoofPoint | None:
        """The point findings read: warm where it has a time (the forward's cache state), else cold."""
        return self.warm if self.warm is not None and self.warm.ns else self.cold


def _point(
    cache: str,
    nbytes: float,
    bytes_source: str,
    ns: float | None,
    time_source: str,
    flops: float,
    lower_bound: bool | None,
    roof: GpuRoof,
) -> RoofPoint:
    intensity = flops / nbytes if nbytes > 0 else None
    attainable = min(roof.peak_tflops, intensity * roof.peak_gbps * 1e9 / 1e12) if intensity is not None else None
    if intensity is None:
        bound = "no DRAM traffic measured"
    elif intensity >= roof.ridge:
        bound = {False: COMPUTE, True: COMPUTE_LOWER_BOUND, None: COMPUTE_FP32_ONLY}[lower_bound]
    else:
        bound = {False: MEMORY, True: MEMORY_LOWER_BOUND, None: MEMORY_FP32_ONLY}[lower_bound]
    achieved_tflops = flops / ns / 1e3 if ns else None
    achieved_gbps = nbytes / ns if ns else None
    if bound.startswith(MEMORY) and achieved_gbps is not None:
        share: float | None = achieved_gbps / roof.peak_gbps
    elif bound.startswith(COMPUTE) and achieved_tflops is not None:
        share = achieved_tflops / roof.peak_tflops
    else:
        share = None
    return RoofPoint(
        cache,
        nbytes,
        bytes_source,
        ns,
        time_source,
        intensity,
        achieved_tflops,
        achieved_gbps,
        attainable,
        bound,
        share,
    )


def roofline_rows(
    layers: dict[str, dict[str, float]], roof: GpuRoof, warm_ns: dict[str, float] | None = None
) -> list[GpuRoofRow]:
    """warm_ns: each layer's kernel time (ns per forward) in the real forward, from torch.profiler."""
    rows = []
    for layer, m in layers.items():
        flops = m.get("fp32_flops", 0.0)
        math = m.get("tensor_math_inst")
        lower = None if math is None else math > 0
        warm = cold = None
        if "dram_read_bytes_warm" in m:
            nbytes = m["dram_read_bytes_warm"] + m.get("dram_write_bytes_warm", 0.0)
            ns = (warm_ns or {}).get(layer)
            warm = _point("warm", nbytes, WARM, ns, WARM_TIME if ns else NO_WARM_TIME, flops, lower, roof)
        if "dram_read_bytes_cold" in m:
            nbytes = m["dram_read_bytes_cold"] + m.get("dram_write_bytes_cold", 0.0)
            ns = m.get("kernel_replay_ns")
            cold = _point("cold", nbytes, COLD, ns, COLD_TIME, flops, lower, roof)
        if warm is None and cold is None:
            continue
        rows.append(GpuRoofRow(layer, flops, math, warm, cold, m.get("sm_throughput_pct"), m.get("mem_throughput_pct")))
    rows.sort(key=lambda r: layer_order(r.layer))
    return rows


@dataclass
class GpuRoofSummary:
    """The roofs, the ridge, where each cache state's bytes and time come from, and the memory-bound layers."""

    roof: GpuRoof
    points: dict[str, list[str]]
    """Cache ("warm", "cold") -> "bytes: <source>; time: <source>" of its points."""
    memory_bound_layers: dict[str, list[str]]
    tensor_core_math: str

    def to_dict(self) -> dict[str, Any]:
        """As gpu-import's JSON writes it."""
        return {
            "peak_tflops": self.roof.peak_tflops,
            "peak_gbps": self.roof.peak_gbps,
            "ridge_flop_per_byte": self.roof.ridge,
            "compute_roof": self.roof.compute_label,
            "bandwidth_roof": self.roof.bandwidth_label,
            "points": self.points,
            "memory_bound_layers": self.memory_bound_layers,
            "tensor_core_math": self.tensor_core_math,
        }


def roofline_summary(rows: list[GpuRoofRow], roof: GpuRoof) -> GpuRoofSummary:
    points = [p for r in rows for p in r.points]
    return GpuRoofSummary(
        roof,
        points={
            cache: sorted({f"bytes: {p.bytes_source}; time: {p.time_source}" for p in points if p.cache == cache})
            for cache in ("warm", "cold")
        },
        memory_bound_layers={
            cache: [r.layer for r in rows for p in r.points if p.cache == cache and p.bound.startswith(MEMORY)]
            for cache in ("warm", "cold")
        },
        tensor_core_math="not recorded" if any(r.lower_bound is None for r in rows) else "ncu HMMA/IMMA/GMMA",
    )
