"""The torch build of this environment (run.json host.torch), without importing torch where it was read before.

`hwprof collect`'s own process runs no model: its workers do. Importing torch there only to describe the build
cost every collect 1.1-1.5 s on a 2-CPU VM (a third of a small collect), so the description is kept in hwprof's
cache, under a key made of everything that decides it: torch's version and folder, this Python, the CPU (model
and flags: the kernels torch picks), the CPUs this process may use (torch's thread count) and the environment
variables torch reads for both. Any change of these is another key, and the build is read from torch again.
cached_per_build keeps other facts of the build under the same key (torch.profiler's probe).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import platform
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from hwprof.core.kept import kept, key_of
from hwprof.schema.codec import JsonObject
from hwprof.schema.host import TorchBuild

T = TypeVar("T")

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "ATEN_CPU_CAPABILITY", "KMP_AFFINITY", "GOMP_CPU_AFFINITY")
"""What torch reads at import for its thread count and its kernels' instruction set."""
CPU_FIELDS = ("vendor_id", "cpu family", "model", "stepping", "flags", "Features", "CPU implementer", "CPU part")
"""The lines of /proc/cpuinfo that name the CPU and its instruction set (not its clock, which moves)."""


def torch_version() -> str | None:
    """torch's version from its installed metadata (the same string as torch.__version__), without importing it."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def _key(cpuinfo: str) -> str | None:
    """cpuinfo: /proc/cpuinfo's text as the caller read it (hwprof.core.host.cpuinfo_text); its first CPU's block."""
    spec = importlib.util.find_spec("torch")
    version = torch_version()
    if spec is None or spec.origin is None or version is None:
        return None
    first = cpuinfo.split("\n\n")[0].splitlines() or [platform.processor()]
    cpu = hashlib.sha1("\n".join(x for x in first if x.startswith(CPU_FIELDS)).encode()).hexdigest()
    env = [f"{k}={os.environ.get(k, '')}" for k in THREAD_VARIABLES]
    parts = [version, spec.origin, sys.executable, platform.machine(), cpu, str(sorted(os.sched_getaffinity(0))), *env]
    return key_of(parts)


def read_build() -> TorchBuild:
    """What the imported torch says of itself."""
    import torch

    config = torch.__config__.show()
    onednn = re.search(r"MKL-DNN v([\d.]+)", config)
    mkl = re.search(r"Math Kernel Library Version ([\w.-]+)", config)
    return TorchBuild.of(
        version=torch.__version__,
        num_threads=torch.get_num_threads(),
        cpu_capability=torch.backends.cpu.get_cpu_capability(),
        mkldnn_available=torch.backends.mkldnn.is_available(),
        onednn_version=onednn.group(1) if onednn else None,
        mkl_version=mkl.group(1) if mkl else None,
        openmp="OpenMP" in config,
    )


def torch_build(cache: Path | None, cpuinfo: str) -> TorchBuild:
    """The build, from hwprof's cache where this environment's key is there, else from torch (and then cached).
    A cache that cannot be read or written is passed over: the build is read from torch."""
    if "torch" in sys.modules:
        return read_build()
    return cached_per_build(
        cache,
        cpuinfo,
        "torch-build",
        read_build,
        load=lambda data: TorchBuild.from_json(data, "the cache", "build."),
        dump=TorchBuild.to_json,
    )


def cached_per_build(
    cache: Path | None,
    cpuinfo: str,
    name: str,
    compute: Callable[[], T],
    *,
    load: Callable[[JsonObject], T],
    dump: Callable[[T], JsonObject],
    keep: Callable[[T], bool] = lambda _: True,
) -> T:
    """What `compute` says of this torch build, kept in hwprof's cache as `name-KEY.json` under the build's key
    (_key; hwprof.core.kept)."""
    key = _key(cpuinfo) if cache is not None else None
    return kept(cache, name, key, compute, load=load, dump=dump, keep=keep)
