"""The roofline model over measured peaks: attainable performance, ridge point, bound classification.

A kernel of arithmetic intensity I (FLOP per byte moved to or from memory) can reach at most
min(peak GFLOP/s, I x peak GB/s). Below the ridge point (peak GFLOP/s / peak GB/s) the memory
roof is the lower one: the kernel is memory-bound; above it, compute-bound.

Intensity from minimum bytes (input + output activations + weights) is an upper bound on the
real intensity: real traffic is at least the minimum. So "compute-bound by minimum bytes" may
still be memory-bound in reality, and only measured traffic (LLC misses x line size, where the
counters exist) settles it; "memory-bound by minimum bytes" is certain, since more traffic only
lowers the intensity further.

A roof the run itself exceeds is wrong, not the run: the probe was slowed (a busy host, a VM whose
speed moved). Then the run's roof is the best rate the run reached (raise_to_best: one of its layers),
said as such with the layer and the probe's figure, so no share of the roof exceeds 100% and every
bound and finding divides by a rate no layer of the run exceeds. That rate is the report's own figure
(a layer's time scaled to the clean forward): where it is mostly that scaling, the roof says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from hwprof.hardware.machine import busy_while_measuring

if TYPE_CHECKING:
    from hwprof.schema.host import PaperPeakDoc, PeaksDoc

MEMORY = "memory"
COMPUTE = "compute"
SCALED_BEYOND = 1.25
"""A raised roof above this many times its layer's unscaled rate is said to come from the scaling."""
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
    source: str = ""
    """How the collect got the peaks: "cached", "measured" (quiet, cached) or "busy" (this run only); "" = not
    recorded (runs before issue 46)."""
    gflops_spread: tuple[float, float] | None = None
    """Lowest and highest sample of the compute probe that set the peak."""
    quiet_measurements: int = 0
    """How many quiet measurements the host's cache had merged (0: not recorded, or a busy one)."""
    measured_gflops: float | None = None
    """The probe's peak where the run exceeded it (raise_to_best); None where the probe's peak is the roof."""
    raised_by: str = ""
    """The layer whose rate is the roof when raised ("model.102 RepConv")."""
    above_measured: int = 0
    """Layers that ran faster than the probe's peak (the roof is then raised)."""
    best_unscaled: float | None = None
    """The raised_by layer's rate from its own measured time where its scaled rate (the roof) is over
    SCALED_BEYOND times that: the roof is then mostly the scaling of layer times to the clean forward."""
    paper: PaperPeakDoc | None = field(default=None, compare=False)
    """The CPU's paper peak (computed, not measured) recorded beside the measured one."""

    @property
    def raised(self) -> bool:
        return self.measured_gflops is not None

    @property
    def probe_gflops(self) -> float:
        """What the probe measured (the roof, unless the run exceeded it)."""
        return self.measured_gflops if self.measured_gflops is not None else self.peak_gflops

    def compute_text(self) -> str:
        """Where the compute roof comes from, for a finding's evidence."""
        probe = f"{self.threads}-thread {self.compute_label}"
        if self.raised:
            return f"this run's own best rate ({self.raised_by}), above a {probe}'s {self.probe_gflops:.1f} GFLOP/s"
        return f"measured by a {probe}"

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
            "source": self.source,
            "gflops_spread": list(self.gflops_spread) if self.gflops_spread else None,
            "quiet_measurements": self.quiet_measurements,
            "measured_gflops": self.measured_gflops,
            "raised_by": self.raised_by,
            "layers_above_measured": self.above_measured,
            "best_unscaled_gflops": self.best_unscaled,
            "paper": self.paper.to_json() if self.paper is not None else None,
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
            source=peaks.source or "",
            gflops_spread=_spread(peaks.gflops_spread, peaks.gflops_samples),
            quiet_measurements=len(peaks.quiet_gflops or []),
            paper=peaks.paper,
        )
    )


def _spread(spread: Any, samples: Any) -> tuple[float, float] | None:
    """[low, high] as recorded, or from the samples of a run recorded before the spread was."""
    values = spread if isinstance(spread, list) and len(spread) == 2 else samples
    numbers = [float(v) for v in values or [] if isinstance(v, int | float)]
    return (min(numbers), max(numbers)) if numbers else None


def raise_to_best(status: RoofStatus, rates: dict[str, float], unscaled: dict[str, float] | None = None) -> RoofStatus:
    """The run's roof: the measured one, or the best rate the run reached where any layer ran faster.

    rates: layer ("model.102 RepConv") -> its achieved GFLOP/s, the figure every `% peak` divides. Every
    figure that divides by the roof (% peak, bound, % of roof, the findings) then divides by one no layer
    exceeds. unscaled: the same layers' rates from their own measured time in their pass, before the
    layer times were scaled to the clean forward; where the best layer's rate is mostly that scaling (a
    host whose load changed between the passes), the roof says so (best_unscaled)."""
    roof = status.roof
    if roof is None or not rates:
        return status
    best = max(rates, key=lambda name: rates[name])
    if rates[best] <= roof.peak_gflops:
        return status
    above = sum(1 for rate in rates.values() if rate > roof.peak_gflops)
    own = (unscaled or {}).get(best)
    raised = replace(
        roof,
        peak_gflops=rates[best],
        measured_gflops=roof.peak_gflops,
        raised_by=best,
        above_measured=above,
        best_unscaled=own if own is not None and rates[best] > SCALED_BEYOND * own else None,
    )
    return replace(status, roof=raised)


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
