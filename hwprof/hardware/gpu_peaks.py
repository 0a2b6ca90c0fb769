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
from typing import Any

from hwprof.core.atomic import atomic_write_text
from hwprof.hardware.machine import cache_dir

MATMUL_N = 8192
REPEATS = 10


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


def device_key(torch: Any, index: int) -> tuple[str, dict[str, Any]]:
    p = torch.cuda.get_device_properties(index)
    ident = {
        "name": p.name,
        "cc": f"{p.major}.{p.minor}",
        "mem_bytes": p.total_memory,
        "sms": p.multi_processor_count,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }
    return hashlib.sha1(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16], ident


def measure(index: int = 0) -> dict[str, Any]:
    import torch

    dev = torch.device(f"cuda:{index}")
    res: dict[str, Any] = {}
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
            res[f"matmul_{label}_tflops"] = 2 * MATMUL_N**3 / ms / 1e9
            del a, b
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    x = torch.empty(2 * 1024**3 // 4, device=dev)
    y = torch.empty_like(x)
    ms = _elapsed_ms(torch, lambda x=x, y=y: y.copy_(x))
    res["d2d_copy_gbps_read_plus_write"] = 2 * x.numel() * 4 / ms / 1e6
    del x, y
    h = torch.empty(256 * 1024**2 // 4, pin_memory=True)
    d = torch.empty_like(h, device=dev)
    ms = _elapsed_ms(torch, lambda d=d, h=h: d.copy_(h, non_blocking=True))
    res["h2d_pinned_gbps"] = h.numel() * 4 / ms / 1e6
    del h, d
    torch.cuda.empty_cache()
    res["method"] = __doc__.split("\n\n")[1].strip() if __doc__ else ""
    return res


def cache_path(key: str, directory: Path | None = None) -> Path:
    return (directory or cache_dir()) / f"gpu-peaks-{key}.json"


def load_or_measure(index: int = 0, force: bool = False, directory: Path | None = None) -> dict[str, Any]:
    """The device's peaks from the cache, or measured now and cached; "cached" says which."""
    import torch

    key, ident = device_key(torch, index)
    path = cache_path(key, directory)
    if path.exists() and not force:
        data = json.loads(path.read_text())
        data["cached"] = True
        return data
    data = {"device": ident, "peaks": measure(index)}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data, indent=1))
    data["cached"] = False
    return data
