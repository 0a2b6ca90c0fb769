"""Measured GPU peaks for the GPU roofline, cached per device like hwprof.hardware.machine's CPU peaks.

The probes are gpu_record.py's (recordings/h100-2026-11-22), timed with CUDA events:
- matmul of two 8192 x 8192 matrices in fp32 (TF32 off), TF32 (`torch.backends.cuda.matmul.allow_tf32`),
  fp16 and bf16: 2 n^3 FLOP per product, mean of 10 after 3 warm-up products;
- device-to-device copy of 2 GiB (fp32): read + write bytes, mean of 10;
- pinned host-to-device copy of 256 MiB, non_blocking, mean of 10.
Cache: `$XDG_CACHE_HOME/hwprof/gpu-peaks-<key>.json`, key = sha1 of the device name, compute capability,
driver-visible memory size and the torch/CUDA versions.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from hwprof.core.atomic import atomic_write_text
from hwprof.hardware.machine import cache_dir

MATMUL_N = 8192
REPEATS = 10


class DeviceIdent(TypedDict):
    """What the cache key is made of: the device as torch sees it, and the torch/CUDA versions."""

    name: str
    cc: str
    """Compute capability, "9.0"."""
    mem_bytes: int
    sms: int
    torch: str
    cuda: str | None


class GpuPeaks(TypedDict):
    """The measured peaks (the module's docstring says how), and how they were measured."""

    matmul_fp32_tflops: float
    matmul_tf32_tflops: float
    matmul_fp16_tflops: float
    matmul_bf16_tflops: float
    d2d_copy_gbps_read_plus_write: float
    h2d_pinned_gbps: float
    method: str


class PeaksFile(TypedDict):
    """The cache file (and the kineto collector's gpu_peaks.json): the device and its peaks; "cached" is
    added on the way out (whether they were read from the cache)."""

    device: DeviceIdent
    peaks: GpuPeaks
    cached: NotRequired[bool]


def _elapsed_ms(torch: Any, fn: Any, repeats: int = REPEATS, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / repeats


def device_key(torch: Any, index: int) -> tuple[str, DeviceIdent]:
    p = torch.cuda.get_device_properties(index)
    ident: DeviceIdent = {
        "name": p.name,
        "cc": f"{p.major}.{p.minor}",
        "mem_bytes": p.total_memory,
        "sms": p.multi_processor_count,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }
    return hashlib.sha1(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16], ident


def measure(index: int = 0) -> GpuPeaks:
    import torch

    dev = torch.device(f"cuda:{index}")
    tflops: dict[str, float] = {}
    saved = torch.backends.cuda.matmul.allow_tf32
    try:
        for label, dtype, tf32 in (
            ("fp32", torch.float32, False),
            ("tf32", torch.float32, True),
            ("fp16", torch.float16, False),
            ("bf16", torch.bfloat16, False),
        ):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            a = torch.randn(MATMUL_N, MATMUL_N, device=dev, dtype=dtype)
            b = torch.randn(MATMUL_N, MATMUL_N, device=dev, dtype=dtype)
            ms = _elapsed_ms(torch, lambda a=a, b=b: a @ b)
            tflops[label] = 2 * MATMUL_N**3 / ms / 1e9
            del a, b
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    x = torch.empty(2 * 1024**3 // 4, device=dev)
    y = torch.empty_like(x)
    ms = _elapsed_ms(torch, lambda x=x, y=y: y.copy_(x))
    d2d_gbps = 2 * x.numel() * 4 / ms / 1e6
    del x, y
    h = torch.empty(256 * 1024**2 // 4, pin_memory=True)
    d = torch.empty_like(h, device=dev)
    ms = _elapsed_ms(torch, lambda d=d, h=h: d.copy_(h, non_blocking=True))
    h2d_gbps = h.numel() * 4 / ms / 1e6
    del h, d
    torch.cuda.empty_cache()
    return {
        "matmul_fp32_tflops": tflops["fp32"],
        "matmul_tf32_tflops": tflops["tf32"],
        "matmul_fp16_tflops": tflops["fp16"],
        "matmul_bf16_tflops": tflops["bf16"],
        "d2d_copy_gbps_read_plus_write": d2d_gbps,
        "h2d_pinned_gbps": h2d_gbps,
        "method": __doc__.split("\n\n")[1].strip() if __doc__ else "",
    }


def cache_path(key: str, directory: Path | None = None) -> Path:
    return (directory or cache_dir()) / f"gpu-peaks-{key}.json"


def load_or_measure(index: int = 0, force: bool = False, directory: Path | None = None) -> PeaksFile:
    """The device's peaks from the cache, or measured now and cached; "cached" says which."""
    import torch

    key, ident = device_key(torch, index)
    path = cache_path(key, directory)
    if path.exists() and not force:
        cached: PeaksFile = json.loads(path.read_text())
        cached["cached"] = True
        return cached
    data: PeaksFile = {"device": ident, "peaks": measure(index)}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data, indent=1))
    data["cached"] = False
    return data
