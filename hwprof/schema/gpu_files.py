"""The per-layer kernel tables the GPU collectors write beside their metric tables: gpu_kineto.kernels.json
(collectors/gpu/kineto/pass_outputs.layer_kernels: each layer's kernels in the torch.profiler trace, by launch
correlation) and ncu.kernels.json (collectors/gpu/ncu/per_layer.kernel_layers: each kernel Nsight Compute
replayed); hwprof.gpu.rundir writes the same files for an imported recording.

Both are {"layers": {layer: [row, ...]}}. Read as records (codec.py): the GPU view and findings take typed
rows, and a damaged field gives one line naming the file and the field ("layers.model.3.0.gpu_us").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from hwprof.schema.bounds import NonNegative
from hwprof.schema.check import RunDirError, found
from hwprof.schema.codec import Record

K = TypeVar("K", bound=Record)


@dataclass(kw_only=True)
class KinetoKernel(Record):
    """One kernel of a layer in the torch.profiler trace, per forward."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("name", "gpu_us", "calls")
    name: str = ""
    cat: str | None = None
    """The trace event's category ("kernel", "gpu_memcpy", ...)."""
    gpu_us: NonNegative = 0.0
    calls: NonNegative = 0.0


@dataclass(kw_only=True)
class NcuKernel(Record):
    """One kernel launch as Nsight Compute replayed it (kernel replay: caches flushed before it)."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("name", "ns")
    name: str = ""
    ns: NonNegative = 0.0
    dram_bytes: NonNegative | None = None
    tensor_math_inst: NonNegative | None = None
    """HMMA + IMMA + GMMA warp instructions; None where the CSV has none of those counters."""
    tensor_pipe_inst: NonNegative | None = None
    grid: str | None = None
    block: str | None = None
    grid_blocks: NonNegative | None = None
    """The launch's size (launch__grid_size, launch__sm_count, launch__waves_per_multiprocessor): the three
    are written together, where the CSV has them."""
    sm_count: NonNegative | None = None
    waves: NonNegative | None = None
    achieved_occupancy_pct: NonNegative | None = None
    theoretical_occupancy_pct: NonNegative | None = None

    @property
    def launch_known(self) -> bool:
        return self.grid_blocks is not None and self.sm_count is not None and self.waves is not None


def read_layer_kernels(doc: Any, row: type[K], where: str) -> dict[str, list[K]]:
    """A <collector>.kernels.json's value `doc`, read from `where`: layer -> its kernel rows (none when the
    file has no "layers")."""
    if not isinstance(doc, dict):
        raise RunDirError(f'{where}: field "(top)" must be an object, found {found(doc)}')
    layers = doc.get("layers", {})
    if not isinstance(layers, dict):
        raise RunDirError(f'{where}: field "layers" must be an object, found {found(layers)}')
    out: dict[str, list[K]] = {}
    for layer, rows in layers.items():
        if not isinstance(rows, list):
            raise RunDirError(f'{where}: field "layers.{layer}" must be a list, found {found(rows)}')
        out[layer] = [row.from_json(r, where, f"layers.{layer}.{i}.") for i, r in enumerate(rows)]
    return out


def layer_kernels_json(layers: dict[str, list[K]]) -> dict[str, Any]:
    """The file's JSON object again (what read_layer_kernels read, key for key)."""
    return {"layers": {layer: [r.to_json() for r in rows] for layer, rows in layers.items()}}
