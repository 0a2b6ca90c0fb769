"""The roofline model over measured peaks: attainable performance, ridge point, bound classification.

A kernel of arithmetic intensity I (FLOP per byte moved to or from memory) can reach at most
min(peak GFLOP/s, I x peak GB/s). Below the ridge point (peak GFLOP/s / peak GB/s) the memory
roof is the lower one: the kernel is memory-bound; above it, compute-bound.

Intensity from minimum bytes (input + output activations + weights) is an upper bound on the
real intensity: real traffic is at least the minimum. So "compute-bound by minimum bytes" may
still be memory-bound in reality, and only measured traffic (LLC misses x line size, where the
counters exist) settles it; "memory-bound by minimum bytes" is certain, since more traffic only
lowers the intensity further.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hwprof.hardware.machine import busy_while_measuring

if TYPE_CHECKING:
    from hwprof.schema.host import PeaksDoc

MEMORY = "memory"
COMPUTE = "compute"
PROBE_LABELS = {"matmul": "large matmul", "conv3x3": "3x3 conv probe"}
"""hwprof.hardware.machine's compute probes, as the report names the one that set the peak."""


@dataclass(frozen=True)
class Roof:
    peak_gflops: float
    peak_gbps: float
    threads: int | None = None
    gflops_method: str = ""
    gbps_method: str = ""
    busy_host: bool = False
    load_avg_1m: float | None = None
    compute_probe: str = "matmul"
    """Which of hwprof.hardware.machine's probes reached the peak (runs before the conv probe: matmul)."""
    interference: float | None = None
    """Others' share of the host's CPUs while the peaks were measured (hwprof.hardware.machine.HostCpuShare)."""

    def busy_text(self) -> str:
        parts = []
        if self.interference is not None:
            parts.append(f"others used {self.interference:.0%} of the CPUs")
        if self.load_avg_1m is not None:
            parts.append(f"load {self.load_avg_1m:.1f}")
        return "; ".join(parts) or "no figures"

    @property
    def compute_label(self) -> str:
        return PROBE_LABELS.get(self.compute_probe, self.compute_probe)

    @property
    def ridge(self) -> float:
        return self.peak_gflops / self.peak_gbps

    def attainable_gflops(self, intensity: float) -> float:
        return min(self.peak_gflops, intensity * self.peak_gbps)

    def bound(self, intensity: float) -> str:
        return MEMORY if intensity < self.ridge else COMPUTE

    def to_dict(self) -> dict[str, Any]:
        return {
            "peak_gflops": self.peak_gflops,
            "peak_gbps": self.peak_gbps,
            "ridge_flop_per_byte": self.ridge,
            "threads": self.threads,
            "gflops_method": self.gflops_method,
            "gbps_method": self.gbps_method,
            "busy_host": self.busy_host,
            "load_avg_1m": self.load_avg_1m,
            "compute_probe": self.compute_probe,
            "interference": self.interference,
        }


@dataclass(frozen=True)
class RoofStatus:
    roof: Roof | None
    reason: str = ""
    """Why there is no roof (empty when there is one)."""
    fix: str = ""


def roof_from_run(peaks: PeaksDoc | None) -> RoofStatus:
    """The roof from run.json's "peaks" (written by the session from hwprof.hardware.machine.measure_peaks)."""
    if peaks is None:
        return RoofStatus(
            None,
            "run.json has no measured machine peaks (collected by an hwprof that did not measure them)",
            "hwprof doctor --peaks on the collecting host, then collect again",
        )
    if peaks.status == "unavailable" or not peaks.gflops or not peaks.gbps:
        return RoofStatus(
            None,
            str(peaks.reason or "machine peaks were not measured"),
            str(peaks.fix or "hwprof doctor --peaks"),
        )
    gflops, gbps = float(peaks.gflops), float(peaks.gbps)
    if gflops <= 0 or gbps <= 0:
        return RoofStatus(None, f"invalid peaks in run.json ({gflops} GFLOP/s, {gbps} GB/s)", "collect again")
    load = peaks.load_avg_1m
    cpus = peaks.logical_cpus or 0
    return RoofStatus(
        Roof(
            gflops,
            gbps,
            peaks.threads,
            peaks.gflops_method or "",
            peaks.gbps_method or "",
            busy_host=busy_while_measuring(load, cpus, peaks.interference),
            load_avg_1m=load,
            compute_probe=_winning_probe(peaks.gflops_probes),
            interference=peaks.interference,
        )
    )


def _winning_probe(probes: Any) -> str:
    if isinstance(probes, dict) and probes:
        return str(max(probes, key=lambda name: float(probes[name])))
    return "matmul"


def intensity(flops: float | None, nbytes: float | None) -> float | None:
    if flops is None or not nbytes:
        return None
    return flops / nbytes


def achieved_gflops(flops: float | None, seconds: float | None) -> float | None:
    if flops is None or not seconds or seconds <= 0:
        return None
    return flops / seconds / 1e9


def achieved_gbps(nbytes: float | None, seconds: float | None) -> float | None:
    if nbytes is None or not seconds or seconds <= 0:
        return None
    return nbytes / seconds / 1e9
