"""Per-layer views read from collectors' files: aten kernels (torch.profiler), native frames
(py-spy) and native kernels on every thread (perf sampling). Each loader returns None when no pass
wrote its file."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hwprof.core.native_view import KERNELS_FILE, NativeView, native_view
from hwprof.schema.hotspots_file import HOTSPOTS_FILE
from hwprof.schema.kernels_file import KernelsFile

if TYPE_CHECKING:
    from hwprof.rundir.reader import RunData

ATEN_KERNELS_FILE = "torch_profiler.kernels.json"
TOP_KERNELS = 3
TOP_FRAMES = 3


@dataclass
class Kernel:
    name: str
    label: str | None
    """oneDNN implementation of the primitive inside the aten op (e.g. brg_conv_fwd:avx512_core)."""
    self_ms: float
    calls: float
    share: float
    """Of the layer's aten self time in the trace pass."""


@dataclass
class Frame:
    function: str
    share: float
    """Of the layer's sampled main-thread time."""
    value: float
    unit: str


def load_kernels(data: RunData) -> dict[str, list[Kernel]] | None:
    doc = data.first_pass_json(ATEN_KERNELS_FILE)
    if doc is None:
        return None
    out: dict[str, list[Kernel]] = {}
    for layer, rows in doc.get("layers", {}).items():
        total = sum(float(r.get("self_us", 0.0)) for r in rows) or 1.0
        ranked = sorted(rows, key=lambda r: -float(r.get("self_us", 0.0)))[:TOP_KERNELS]
        out[layer] = [
            Kernel(
                str(r["name"]),
                r.get("label"),
                float(r.get("self_us", 0.0)) / 1e3,
                float(r.get("calls_per_iter", r.get("calls", 0))),
                float(r.get("self_us", 0.0)) / total,
            )
            for r in ranked
        ]
    return out


def load_native(data: RunData) -> NativeView | None:
    doc = data.first_pass_json(KERNELS_FILE)
    return None if doc is None else native_view(KernelsFile.from_json(doc, KERNELS_FILE))


def load_frames(data: RunData) -> dict[str, tuple[list[Frame], dict[str, float]]] | None:
    doc = data.first_pass_json(HOTSPOTS_FILE)
    if doc is None:
        return None
    out: dict[str, tuple[list[Frame], dict[str, float]]] = {}
    for layer, bucket in doc.get("layers", {}).items():
        frames = []
        for row in bucket.get("native", [])[:TOP_FRAMES]:
            unit = next((k for k in row if k not in ("function", "share")), "")
            frames.append(Frame(str(row["function"]), float(row["share"]), float(row.get(unit, 0.0)), unit))
        out[layer] = (frames, {k: float(v) for k, v in bucket.get("shares", {}).items()})
    return out
