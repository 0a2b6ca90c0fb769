"""The machine a run ran on, as run.json records it: "host" (hwprof.core.host.host_info, or what an imported
GPU run's recording states) and "peaks" (hwprof.hardware.machine.Peaks as written, or why there are none).
Records (codec.py): a damaged field gives one line naming run.json and the field."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hwprof.schema.bounds import Count, NonNegative
from hwprof.schema.codec import JsonObject, Record


@dataclass(kw_only=True)
class TorchBuild(Record):
    """The torch build the forward ran with (hwprof.core.host.torch_build)."""

    version: str | None = None
    num_threads: Count | None = None
    cpu_capability: str | None = None
    mkldnn_available: bool | None = None
    onednn_version: str | None = None
    mkl_version: str | None = None
    openmp: bool | None = None


@dataclass(kw_only=True)
class HostDoc(Record):
    """run.json "host": the CPU, its topology and ISA, the OS, Python, torch and the package versions."""

    recorded: bool | None = None
    """Imported runs only: whether the recording stated its machine."""
    hostname: str | None = None
    cpu_model: str | None = None
    logical_cpus: Count | None = None
    physical_cores: Count | None = None
    smt: bool | None = None
    affinity: list[Any] | None = None
    isa_flags: list[Any] | None = None
    governor: str | None = None
    kernel: str | None = None
    os: str | None = None
    perf_event_paranoid: str | None = None
    python: str | None = None
    torch: TorchBuild = field(default_factory=TorchBuild)
    packages: JsonObject | None = None
    """Package name -> its version ("not installed")."""


@dataclass(kw_only=True)
class PaperPeakDoc(Record):
    """run.json "peaks.paper": the CPU's paper FP32 peak (hwprof.hardware.paper_peak: cores x GHz x FLOP/cycle
    from /proc/cpuinfo, a computed figure, not a measurement), each factor with its source; gflops None and
    reason where a factor is unknown."""

    gflops: NonNegative | None = None
    cores: Count | None = None
    cores_source: str | None = None
    ghz: NonNegative | None = None
    ghz_source: str | None = None
    flop_per_cycle: Count | None = None
    flop_source: str | None = None
    host_cores: Count | None = None
    reason: str | None = None


@dataclass(kw_only=True)
class PeaksDoc(Record):
    """run.json "peaks": this host's measured peak GFLOP/s and GB/s for the roofline, or status "unavailable"
    with the reason and the fix."""

    status: str | None = None
    reason: str | None = None
    fix: str | None = None
    gflops: NonNegative | None = None
    gbps: NonNegative | None = None
    threads: Count | None = None
    host_key: str | None = None
    cpu_model: str | None = None
    logical_cpus: Count | None = None
    torch_version: str | None = None
    measured_at: str | None = None
    load_avg_1m: NonNegative | None = None
    gflops_method: str | None = None
    gbps_method: str | None = None
    gflops_samples: list[Any] | None = None
    gbps_samples: list[Any] | None = None
    gflops_probes: JsonObject | None = None
    """Best GFLOP/s of each compute probe (matmul, conv3x3)."""
    interference: float | None = None
    measure_s: NonNegative | None = None
    lowest_load_tried: float | None = None
    """Runs before issue 46 only (a busy cache entry measured again once the load fell)."""
    triad_array_bytes: int | None = None
    """Each of the bandwidth probe's three arrays (sized by the LLC, bounded by available memory)."""
    llc_bytes: int | None = None
    triad_capped_by: str | None = None
    """'memory' or 'the size cap' where a bound made the arrays smaller than 4x the LLC; '' where not."""
    quiet_gflops: list[Any] | None = None
    """The compute peak of each quiet measurement the host's cache merged (gflops is the highest); empty when
    these figures were measured on a busy host (never cached)."""
    source: str | None = None
    """"cached" (quiet measurements made earlier), "measured" (now, on a quiet host; cached) or "busy" (now,
    on a busy host: this run's only, not cached); absent in runs before issue 46."""
    gflops_spread: list[Any] | None = None
    """[lowest, highest] of the winning compute probe's samples."""
    gbps_spread: list[Any] | None = None
    cache_file: str | None = None
    """Where the collecting host keeps (or would keep) these peaks, and how $XDG_CACHE_HOME was read there."""
    version: int | None = None
    ridge_flop_per_byte: NonNegative | None = None
    busy_host: bool | None = None
    paper: PaperPeakDoc | None = None
