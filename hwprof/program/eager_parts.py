"""A TorchScript model's eager parts: the layers that an eager wrapper around the traced module runs itself.

YOLOv7's detect.py (without --no-trace) wraps its model in `utils.torch_utils.TracedModel`: `self.model` is
`torch.jit.trace` of the whole Model, whose forward stops before its last layer (`model.traced = True`), and
`self.detect_layer`, the eager IDetect that was `model.model[-1]`, runs on its output. The layer table (the
traced Model's layer list) has model.105, but its TorchScript copy never runs: the eager head does, outside
TorchScript, where no module hierarchy names it, so its ops would fall outside every layer.

A module of the wrapper that is not TorchScript and holds the very tensors (parameters and buffers) of a layer
of the table is that layer: torch.jit.trace keeps the eager module's tensors in its copy. It gets hwprof's live
layer markers, as an eager model's layers do, in the passes that time a TorchScript model's layers; the other
layers' spans come from the module hierarchy there (hwprof.workload.script_scopes). A layer without tensors (Concat,
Upsample) cannot be told from another of its class this way, and is left to the hierarchy.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hwprof.core.markers import layer_modules
from hwprof.workload.script_scopes import class_name

EagerLayer = tuple[str, int, Any]
"""(layer name, top-level index, the eager module that runs it), as hwprof.core.markers.attach_markers takes."""


def eager_layers(model: Any, layers_module: Any, depth: int = 1) -> list[EagerLayer]:
    """The layers of `layers_module`'s table (a TorchScript module's) that `model`, an eager module around it,
    runs through eager modules of its own, in the table's order; [] for a model that is TorchScript itself."""
    if _scripted(model):
        return []
    table = layer_modules(layers_module, depth)
    by_tensors: dict[frozenset[int], tuple[str, int]] = {}
    for name, index, module in table:
        key = _tensors(module)
        if key:
            by_tensors.setdefault(key, (name, index))
    found: dict[str, EagerLayer] = {}
    for module in _eager_modules(model):
        hit = by_tensors.get(_tensors(module))
        if hit is not None and hit[0] not in found:
            found[hit[0]] = (hit[0], hit[1], module)
    order = [name for name, _, _ in table]
    return sorted(found.values(), key=lambda layer: order.index(layer[0]))


def describe(layers: list[EagerLayer]) -> str:
    """The report's note on them, in one line."""
    names = ", ".join(f"{name} ({class_name(module)})" for name, _, module in layers)
    return (
        f"{names}: run eagerly by the model around its TorchScript module, outside TorchScript: timed by hwprof's "
        "live layer markers, the other layers by the module hierarchy"
    )


def _scripted(module: Any) -> bool:
    import torch

    return isinstance(module, torch.jit.ScriptModule)


def _eager_modules(model: Any) -> Iterator[Any]:
    """The modules below `model` reached without entering a TorchScript module, parents before children."""
    for child in model.children():
        if _scripted(child):
            continue
        yield child
        yield from _eager_modules(child)


def _tensors(module: Any) -> frozenset[int]:
    """The storage addresses of a module's parameters and buffers (its children's included)."""
    tensors = [*module.parameters(), *module.buffers()]
    return frozenset(t.data_ptr() for t in tensors if t.numel())
