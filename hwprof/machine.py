"""Measured machine peaks for the roofline, cached per host with how they were measured.

Peak FP32 compute: the best of several large square `torch.matmul` calls (float32, one oneDNN /
MKL GEMM) with the run's torch intra-op threads: 2 n^3 FLOPs each. This is the attainable peak
of the library the model runs on, not the paper peak (cores x GHz x FLOPs/cycle), which a
YOLO convolution can never reach.

Memory bandwidth: a STREAM-like triad `a = b + s*c` on float32 arrays each at least 4x the
last-level cache (STREAM's own sizing rule), as one fused `torch.add(b, c, alpha=s, out=a)` with
the same threads. Bytes counted as STREAM does: 3 arrays x N x 4 B per pass (two reads, one
write; write-allocate traffic not counted). Best of several passes.

Both figures are the best of the repeats because interference only ever slows a kernel down;
the load average at the time is kept too, since a busy host (other processes on the cores)
gives peaks that are too low, and the report says so.

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

PEAKS_VERSION = 1
MATMUL_N = 1536
MATMUL_REPEATS = 8
TRIAD_REPEATS = 10
TRIAD_MIN_BYTES = 64 * 2**20
"""Each triad array is at least this big, and at least 4x the last-level cache."""
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
    measure_s: float = 0.0
    lowest_load_tried: float | None = None
    """The lowest 1-min load any measurement behind these figures ran at (see measure_peaks)."""
    version: int = PEAKS_VERSION
    cached: bool = False
    """True when this object was read from the cache rather than measured just now."""

    @property
    def ridge(self) -> float:
        """The roofline's ridge point (FLOP/B): below it a kernel cannot reach peak compute."""
        return self.gflops / self.gbps

    @property
    def busy_host(self) -> bool:
        """The host's 1-min load exceeded the thread count while measuring: peaks are likely low."""
        return self.load_avg_1m is not None and self.load_avg_1m > self.logical_cpus + 0.5

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("cached")
        out["ridge_flop_per_byte"] = self.ridge
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Peaks:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


def host_key(threads: int) -> str:
    import torch

    from hwprof.host import cpu_model

    text = f"{cpu_model()}|{os.cpu_count()}|{torch.__version__}|{threads}|{platform.machine()}"
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hwprof"


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
    with _threads(threads), torch.inference_mode():
        torch.matmul(a, b, out=out)  # warm-up: thread pool, GEMM kernel selection, page faults

        def step() -> float:
            t0 = time.perf_counter()
            torch.matmul(a, b, out=out)
            return time.perf_counter() - t0

        times = _repeat(step, repeats)
    return [2 * n**3 / t / 1e9 for t in times]


def triad_elements(llc: int | None) -> int:
    size = max(TRIAD_MIN_BYTES, 4 * (llc or 0))
    return size // 4


def measure_triad_gbps(threads: int, elements: int, repeats: int = TRIAD_REPEATS) -> list[float]:
    import torch

    b = torch.full((elements,), 1.5, dtype=torch.float32)
    c = torch.full((elements,), 0.5, dtype=torch.float32)
    a = torch.empty(elements, dtype=torch.float32)
    with _threads(threads), torch.inference_mode():
        torch.add(b, c, alpha=3.0, out=a)  # touches every page of a

        def step() -> float:
            t0 = time.perf_counter()
            torch.add(b, c, alpha=3.0, out=a)
            return time.perf_counter() - t0

        times = _repeat(step, repeats)
    return [3 * elements * 4 / t / 1e9 for t in times]


class _threads:
    """Run with torch's intra-op thread count set to n, restoring the previous count after."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.before = 0

    def __enter__(self) -> None:
        import torch

        self.before = torch.get_num_threads()
        torch.set_num_threads(self.n)

    def __exit__(self, *exc: object) -> None:
        import torch

        torch.set_num_threads(self.before)


def measure(threads: int) -> Peaks:
    """Measure both peaks now (no cache)."""
    import torch

    from hwprof.host import cpu_model

    if threads < 1:
        raise ValueError(f"threads must be at least 1 (got {threads})")
    started = time.perf_counter()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    flops = measure_matmul_gflops(threads, MATMUL_N, MATMUL_REPEATS)
    llc = llc_bytes()
    elements = triad_elements(llc)
    gbps = measure_triad_gbps(threads, elements, TRIAD_REPEATS)
    llc_text = f"{llc / 2**20:.0f} MiB last-level cache" if llc else "last-level cache size unknown"
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
            f"best of {len(flops)} torch.matmul float32 {MATMUL_N}x{MATMUL_N} @ {MATMUL_N}x{MATMUL_N} "
            f"(2n^3 FLOPs each) with {threads} torch threads, after one warm-up"
        ),
        gbps_method=(
            f"STREAM-like triad a = b + 3c: best of {len(gbps)} torch.add(b, c, alpha=3, out=a) on "
            f"float32 arrays of {elements * 4 / 2**20:.0f} MiB each ({llc_text}) with {threads} torch "
            "threads; 12 B per element counted (2 reads + 1 write, no write-allocate)"
        ),
        gflops_samples=[round(v, 3) for v in flops],
        gbps_samples=[round(v, 3) for v in gbps],
        measure_s=time.perf_counter() - started,
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
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(peaks.to_dict(), indent=1))
        os.replace(tmp, path)
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
    out.gbps, out.gbps_method, out.gbps_samples = bw.gbps, bw.gbps_method, bw.gbps_samples
    if flops is not b or bw is not b:
        out.load_avg_1m = max(x for x in (a.load_avg_1m, b.load_avg_1m, 0.0) if x is not None)
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
