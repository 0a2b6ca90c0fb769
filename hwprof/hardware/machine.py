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
/proc/stat. Above INTERFERENCE_BUSY (or a 1-min load above the CPU count) the host was busy: the
figures are flagged as likely too low and serve that run only; they are never cached.

Cache: `$XDG_CACHE_HOME/hwprof/peaks-<key>.json` (default ~/.cache/hwprof), key = sha1 of the
CPU model, logical CPU count, torch version and thread count. It holds quiet measurements only,
merged by keeping the highest of each figure (a VM only ever runs slower than its peak: its speed
moves with its neighbours), with the probe's samples (their spread) and each quiet compute peak
seen. A run without a cached quiet measurement measures; `force=True` measures again and merges.
The paper peak (cores x clock x FLOP/cycle) stands beside it: hardware/paper_peak.py.
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

PEAKS_VERSION = 4
"""3: the triad's array size recorded (bounded by memory); 4: only quiet measurements cached, the highest kept
(a version-3 entry may hold a busy host's figures). A cache entry of another version is measured again."""
MATMUL_N = 2048
MATMUL_REPEATS = 8
CONV_CHANNELS = 128
CONV_HW = 80
"""The 3x3 conv probe: C -> C channels on a 1 x C x HW x HW input (a YOLO neck layer at 640)."""
CONV_REPEATS = 60
INTERFERENCE_BUSY = 0.10
"""Share of the host's CPU time used by others while measuring above which the peaks are suspect."""
TRIAD_REPEATS = 10
QUIET_KEPT = 20
CACHED = "cached"
MEASURED_QUIET = "measured"
BUSY_NOT_CACHED = "busy"
"""Peaks.source: read from the cache (quiet measurements made earlier); measured now on a quiet host (and
cached, the highest kept); measured now on a busy host: this run's only, not cached."""
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
    quiet_gflops: list[float] = field(default_factory=list)
    """The compute peak of each quiet measurement the cache has merged (the last QUIET_KEPT); gflops is the
    highest. Empty for a busy-host measurement, which is never cached."""
    source: str = ""
    """How this run got the figures: CACHED, MEASURED_QUIET or BUSY_NOT_CACHED."""
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

    @property
    def gflops_spread(self) -> list[float]:
        """[lowest, highest] of the winning compute probe's samples: how far this VM's speed moved."""
        return [min(self.gflops_samples), max(self.gflops_samples)] if self.gflops_samples else []

    @property
    def gbps_spread(self) -> list[float]:
        return [min(self.gbps_samples), max(self.gbps_samples)] if self.gbps_samples else []

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("cached")
        out["ridge_flop_per_byte"] = self.ridge
        out["busy_host"] = self.busy_host
        out["gflops_spread"], out["gbps_spread"] = self.gflops_spread, self.gbps_spread
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
    from hwprof.core.host import cpu_model
    from hwprof.core.torch_build import torch_version

    text = f"{cpu_model()}|{os.cpu_count()}|{torch_version()}|{threads}|{platform.machine()}"
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
    if peaks.busy_host:
        return None  # never written so; a hand-edited or foreign file
    peaks.cached, peaks.source = True, CACHED
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


def keep_highest(cached: Peaks, new: Peaks) -> Peaks:
    """Two quiet measurements merged: each figure from the one that reached higher (a VM only ever runs
    slower than its peak), with that one's samples and method; every quiet compute peak kept in quiet_gflops."""
    flops, bw = (cached if cached.gflops >= new.gflops else new), (cached if cached.gbps >= new.gbps else new)
    out = Peaks(**{**asdict(flops), "cached": False})
    out.gbps, out.gbps_method, out.gbps_samples = bw.gbps, bw.gbps_method, bw.gbps_samples
    out.triad_array_bytes, out.llc_bytes, out.triad_capped_by = bw.triad_array_bytes, bw.llc_bytes, bw.triad_capped_by
    out.quiet_gflops = [*(cached.quiet_gflops or [round(cached.gflops, 3)]), round(new.gflops, 3)][-QUIET_KEPT:]
    out.measure_s = new.measure_s
    return out


def measure_peaks(
    threads: int, force: bool = False, directory: Path | None = None, probe: Callable[[int], Peaks] | None = None
) -> Peaks:
    """This host's peaks with `threads` torch threads: the cached quiet peaks, or measured now.

    The cache holds only measurements made on a quiet host, the highest of them (keep_highest). Without
    one (or with force) the probe measures now: on a quiet host the result joins the cache; on a busy host
    it serves this run only (source BUSY_NOT_CACHED), and the next run measures again. probe: the
    measurement (tests inject one); `measure` by default.
    """
    cached = load_cached(threads, directory)
    if cached is not None and not force:
        return cached
    peaks = (probe or measure)(threads)
    if peaks.busy_host:
        peaks.source = BUSY_NOT_CACHED
        return peaks
    peaks.quiet_gflops = [round(peaks.gflops, 3)]
    merged = keep_highest(cached, peaks) if cached is not None else peaks
    merged.source = MEASURED_QUIET
    save_cached(merged, directory)
    return merged
