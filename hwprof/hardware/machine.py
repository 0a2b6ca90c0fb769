"""Measured machine peaks for the roofline, cached per host with how they were measured.

Peak FP32 compute: the higher of two probes with the run's torch intra-op threads, each the best
of several calls: a large square `torch.matmul` (float32 GEMM, 2 n^3 FLOPs) and a YOLO-shaped 3x3
convolution (oneDNN, 2 C^2 9 H W FLOPs). This is the attainable peak of the library the model
runs on, not the paper peak (cores x GHz x FLOPs/cycle). The convolution probe is there because
oneDNN's direct convolution can beat the GEMM here (170 vs 154 GFLOP/s on 2 EPYC vCPUs): with the
GEMM alone, YOLO's own conv layers measured above 100% of "peak".

Memory bandwidth: a STREAM-like triad `a = b + s*c` on float32 arrays each at least 4x the
last-level cache (STREAM's own sizing rule) but bounded by the memory available (hardware/triad.py:
the record says how large they were and whether a bound won), as one fused
`torch.add(b, c, alpha=s, out=a)` with the same threads. Bytes counted as STREAM does: 3 arrays x N x 4 B
per pass (two reads, one write; write-allocate traffic not counted). Best of several passes.

Both figures are the best of the repeats because interference only ever slows a kernel down.
Interference is measured, not guessed: the share of the host's CPU time that went to anything
but this process (other processes, and steal by the hypervisor) during the measurement, from
/proc/stat. Above INTERFERENCE_BUSY (or a 1-min load above the CPU count) the peaks are flagged
as likely too low, the report says so, and the next run on a quieter host measures again.

Cache: `$XDG_CACHE_HOME/hwprof/peaks-<key>.json` (default ~/.cache/hwprof), key = sha1 of the
CPU model, logical CPU count, torch version and thread count; `force=True` measures again.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hwprof.core.atomic import atomic_write_text
from hwprof.core.envvars import hwprof_cache
from hwprof.hardware.torch_threads import torch_threads
from hwprof.hardware.triad import TriadSize, available_memory, triad_size

PEAKS_VERSION = 3
"""3: the triad's array size recorded (bounded by memory); a cache entry of another version is measured again."""
MATMUL_N = 2048
MATMUL_REPEATS = 8
CONV_CHANNELS = 128
CONV_HW = 80
"""The 3x3 conv probe: C -> C channels on a 1 x C x HW x HW input (a YOLO neck layer at 640)."""
CONV_REPEATS = 60
INTERFERENCE_BUSY = 0.10
"""Share of the host's CPU time used by others while measuring above which the peaks are suspect."""
TRIAD_REPEATS = 10
BUDGET_S = 2.5
"""Each measurement stops repeating once it has used this much time (after at least 3 repeats)."""


@dataclass
class Peaks:
    """Peak FP32 GFLOP/s and memory GB/s of this host with `threads` torch threads."""

    gflops: float
    gbps: float
    threads: int
    host_key: str
    cpu_model: str
    logical_cpus: int
    torch_version: str
    measured_at: str
    load_avg_1m: float | None
    gflops_method: str
    gbps_method: str
    gflops_samples: list[float] = field(default_factory=list)
    gbps_samples: list[float] = field(default_factory=list)
    gflops_probes: dict[str, float] = field(default_factory=dict)
    """Best GFLOP/s of each compute probe (matmul, conv3x3); gflops is the highest."""
    interference: float | None = None
    """Share of the host's CPU time that others (processes, hypervisor steal) used while measuring."""
    measure_s: float = 0.0
    lowest_load_tried: float | None = None
    """The lowest 1-min load any measurement behind these figures ran at (see measure_peaks)."""
    triad_array_bytes: int | None = None
    """Each of the triad's three arrays (hardware/triad.py)."""
    llc_bytes: int | None = None
    triad_capped_by: str = ""
    """'memory' or 'the size cap' where a bound made the arrays smaller than 4x the LLC asks; '' where not."""
    version: int = PEAKS_VERSION
    cached: bool = False
    """True when this object was read from the cache rather than measured just now."""

    @property
    def ridge(self) -> float:
        """The roofline's ridge point (FLOP/B): below it a kernel cannot reach peak compute."""
        return self.gflops / self.gbps

    @property
    def busy_host(self) -> bool:
        return busy_while_measuring(self.load_avg_1m, self.logical_cpus, self.interference)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("cached")
        out["ridge_flop_per_byte"] = self.ridge
        out["busy_host"] = self.busy_host
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Peaks:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


class HostCpuShare:
    """CPU time that others used on this host over a window: /proc/stat busy time (steal included)
    less this process's own CPU time, as a share of wall time x CPUs. None where /proc is absent."""

    def __init__(self) -> None:
        self.start = self._now()

    @staticmethod
    def _now() -> tuple[float, float, float] | None:
        from hwprof.perf.steal import busy_ns

        busy = busy_ns()
        return None if busy is None else (time.monotonic(), busy / 1e9, time.process_time())

    def others(self) -> float | None:
        end = self._now()
        if self.start is None or end is None or end[0] <= self.start[0]:
            return None
        wall, busy, own = (e - s for e, s in zip(end, self.start, strict=True))
        return max(0.0, (busy - own) / (wall * (os.cpu_count() or 1)))


def busy_while_measuring(load_avg_1m: float | None, logical_cpus: int, interference: float | None) -> bool:
    """Others used the host while measuring (or its 1-min load exceeded its CPUs): peaks likely low."""
    if interference is not None and interference > INTERFERENCE_BUSY:
        return True
    return load_avg_1m is not None and logical_cpus > 0 and load_avg_1m > logical_cpus + 0.5


def host_key(threads: int) -> str:
    import torch

    from hwprof.core.host import cpu_model

    text = f"{cpu_model()}|{os.cpu_count()}|{torch.__version__}|{threads}|{platform.machine()}"
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def cache_dir() -> Path:
    return hwprof_cache()


def cache_path(threads: int, directory: Path | None = None) -> Path:
    return (directory or cache_dir()) / f"peaks-{host_key(threads)}.json"


def llc_bytes(root: str = "/sys/devices/system/cpu/cpu0/cache") -> int | None:
    """Size of the highest-level cache of cpu0 from sysfs, or None when sysfs does not say."""
    best: tuple[int, int] | None = None
    for index in Path(root).glob("index*"):
        try:
            level = int((index / "level").read_text())
            size = _parse_size((index / "size").read_text().strip())
        except (OSError, ValueError):
            continue
        if best is None or level > best[0]:
            best = (level, size)
    return best[1] if best else None


def _parse_size(text: str) -> int:
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    if text and text[-1].upper() in units:
        return int(text[:-1]) * units[text[-1].upper()]
    return int(text)


def _repeat(step: Callable[[], float], repeats: int) -> list[float]:
    """Run step() (it returns its own seconds) up to `repeats` times within BUDGET_S."""
    times: list[float] = []
    spent = 0.0
    for i in range(repeats):
        seconds = step()
        times.append(seconds)
        spent += seconds
        if i >= 2 and spent > BUDGET_S:
            break
    return times


def measure_matmul_gflops(threads: int, n: int = MATMUL_N, repeats: int = MATMUL_REPEATS) -> list[float]:
    import torch

    generator = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, dtype=torch.float32, generator=generator)
    b = torch.randn(n, n, dtype=torch.float32, generator=generator)
    out = torch.empty(n, n, dtype=torch.float32)
    with torch_threads(threads), torch.inference_mode():
        torch.matmul(a, b, out=out)  # warm-up: thread pool, GEMM kernel selection, page faults

        def step() -> float:
            t0 = time.perf_counter()
            torch.matmul(a, b, out=out)
            return time.perf_counter() - t0

        times = _repeat(step, repeats)
    return [2 * n**3 / t / 1e9 for t in times]


def measure_conv_gflops(
    threads: int, channels: int = CONV_CHANNELS, hw: int = CONV_HW, repeats: int = CONV_REPEATS
) -> list[float]:
    import torch

    torch.manual_seed(0)
    conv = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False).eval()
    x = torch.randn(1, channels, hw, hw)
    with torch_threads(threads), torch.inference_mode():
        conv(x)  # warm-up: oneDNN primitive creation, weight reorder

        def step() -> float:
            t0 = time.perf_counter()
            conv(x)
            return time.perf_counter() - t0

        times = _repeat(step, repeats)
    flops = 2 * channels * channels * 9 * hw * hw
    return [flops / t / 1e9 for t in times]


def measure_triad_gbps(threads: int, elements: int, repeats: int = TRIAD_REPEATS) -> list[float]:
    import torch

    b = torch.full((elements,), 1.5, dtype=torch.float32)
    c = torch.full((elements,), 0.5, dtype=torch.float32)
    a = torch.empty(elements, dtype=torch.float32)
    with torch_threads(threads), torch.inference_mode():
        torch.add(b, c, alpha=3.0, out=a)  # touches every page of a

        def step() -> float:
            t0 = time.perf_counter()
            torch.add(b, c, alpha=3.0, out=a)
            return time.perf_counter() - t0

        times = _repeat(step, repeats)
    return [3 * elements * 4 / t / 1e9 for t in times]


def measure(threads: int) -> Peaks:
    """Measure both peaks now (no cache)."""
    import torch

    from hwprof.core.host import cpu_model

    if threads < 1:
        raise ValueError(f"threads must be at least 1 (got {threads})")
    started = time.perf_counter()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    share = HostCpuShare()
    probes = {
        "matmul": measure_matmul_gflops(threads, MATMUL_N, MATMUL_REPEATS),
        "conv3x3": measure_conv_gflops(threads, CONV_CHANNELS, CONV_HW, CONV_REPEATS),
    }
    best = max(probes, key=lambda name: max(probes[name]))
    flops = probes[best]
    size: TriadSize = triad_size(llc_bytes(), available_memory())
    gbps = measure_triad_gbps(threads, size.elements, TRIAD_REPEATS)
    matmul, conv = max(probes["matmul"]), max(probes["conv3x3"])
    return Peaks(
        gflops=max(flops),
        gbps=max(gbps),
        threads=threads,
        host_key=host_key(threads),
        cpu_model=cpu_model(),
        logical_cpus=os.cpu_count() or 0,
        torch_version=torch.__version__,
        measured_at=datetime.now(UTC).isoformat(timespec="seconds"),
        load_avg_1m=load,
        gflops_method=(
            f"the higher of two float32 probes with {threads} torch threads, each the best of its repeats "
            f"after one warm-up: torch.matmul {MATMUL_N}x{MATMUL_N} @ {MATMUL_N}x{MATMUL_N} (2n^3 FLOPs; "
            f"{matmul:.1f} GFLOP/s, best of {len(probes['matmul'])}) and a 3x3 conv {CONV_CHANNELS}->"
            f"{CONV_CHANNELS} channels on 1x{CONV_CHANNELS}x{CONV_HW}x{CONV_HW} (oneDNN; {conv:.1f} GFLOP/s, "
            f"best of {len(probes['conv3x3'])}): {best}"
        ),
        gbps_method=(
            f"STREAM-like triad a = b + 3c: best of {len(gbps)} torch.add(b, c, alpha=3, out=a) on "
            f"float32 {size.text}; with {threads} torch threads; 12 B per element counted (2 reads + 1 write, "
            "no write-allocate)"
        ),
        gflops_samples=[round(v, 3) for v in flops],
        gbps_samples=[round(v, 3) for v in gbps],
        gflops_probes={name: round(max(v), 3) for name, v in probes.items()},
        interference=share.others(),
        measure_s=time.perf_counter() - started,
        triad_array_bytes=size.array_bytes,
        llc_bytes=size.llc_bytes,
        triad_capped_by=size.capped_by,
    )


def load_cached(threads: int, directory: Path | None = None) -> Peaks | None:
    path = cache_path(threads, directory)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if data.get("version") != PEAKS_VERSION or data.get("host_key") != host_key(threads):
        return None
    try:
        peaks = Peaks.from_dict(data)
    except TypeError:
        return None
    peaks.cached = True
    return peaks


def save_cached(peaks: Peaks, directory: Path | None = None) -> Path | None:
    """Write the cache file atomically; None when the cache directory is not writable."""
    path = cache_path(peaks.threads, directory)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(peaks.to_dict(), indent=1))
    except OSError:
        return None
    return path


QUIETER_BY = 1.0
"""A cache entry measured on a busy host is measured again once the 1-min load is this much lower."""


def _quieter_now(cached: Peaks) -> bool:
    tried = cached.lowest_load_tried if cached.lowest_load_tried is not None else cached.load_avg_1m
    if not cached.busy_host or tried is None or not hasattr(os, "getloadavg"):
        return False
    return os.getloadavg()[0] < tried - QUIETER_BY


def best_of(a: Peaks, b: Peaks) -> Peaks:
    """Each figure from the measurement that reached higher: interference only ever lowers a peak."""
    flops, bw = (a if a.gflops >= b.gflops else b), (a if a.gbps >= b.gbps else b)
    out = Peaks(**{**asdict(b), "cached": False})
    out.gflops, out.gflops_method, out.gflops_samples = flops.gflops, flops.gflops_method, flops.gflops_samples
    out.gflops_probes = flops.gflops_probes
    out.gbps, out.gbps_method, out.gbps_samples = bw.gbps, bw.gbps_method, bw.gbps_samples
    out.triad_array_bytes, out.llc_bytes, out.triad_capped_by = bw.triad_array_bytes, bw.llc_bytes, bw.triad_capped_by
    if flops is not b or bw is not b:
        out.load_avg_1m = max(x for x in (a.load_avg_1m, b.load_avg_1m, 0.0) if x is not None)
        out.interference = max((x for x in (a.interference, b.interference) if x is not None), default=None)
    tried = [x for x in (a.lowest_load_tried, a.load_avg_1m, b.load_avg_1m) if x is not None]
    out.lowest_load_tried = min(tried) if tried else None
    return out


def measure_peaks(threads: int, force: bool = False, directory: Path | None = None) -> Peaks:
    """This host's peaks with `threads` torch threads: from the cache, or measured (and cached).

    force: measure again and replace the cache. A cache entry measured on a busy host is
    measured again when the host is quieter, keeping the better of the two for each figure.
    """
    cached = None if force else load_cached(threads, directory)
    if cached is not None and not _quieter_now(cached):
        return cached
    peaks = measure(threads)
    if cached is not None:
        peaks = best_of(cached, peaks)
    save_cached(peaks, directory)
    return peaks
