"""The layer table: what every measurement is attributed to.

One row per layer the markers cover (model.model[i], and their children with --depth 2): index,
qualified name, type, from-edges, params, input/output shapes and bytes, weight bytes. Shapes come
from one forward pass with hooks that only record, on a real input of the run's size: hwprof's own forward for
the built-in pipeline, the first marked call of a user's program for a program (LayerRecorder).

A TorchScript model (a user's traced program) keeps its submodules' names, classes (`original_name`),
parameters and buffers, but runs its children where no hook fires, and drops the Python attributes a YOLO
layer carries (`f`, `type`): its rows have no shapes, no in/out bytes and no from-edges
(scripted_layer_table).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from hwprof.core.markers import layer_modules

if TYPE_CHECKING:
    import torch


@dataclass
class LayerInfo:
    index: int
    name: str
    """Qualified module name: "model.7", or "model.7.cv1" at depth 2."""
    type: str
    """Short class name, e.g. Conv, SPPCSPC, C2f, Detect."""
    qualified_type: str
    from_: list[int]
    params: int
    weight_bytes: int
    depth: int = 1
    in_shapes: list[list[int]] = field(default_factory=list)
    out_shapes: list[list[int]] = field(default_factory=list)
    in_bytes: int | None = 0
    out_bytes: int | None = 0
    """None: not known (a TorchScript layer's, whose hooks never fire)."""

    @property
    def label(self) -> str:
        """How a person reads the layer: "7 Conv", or "7.cv1 Conv" at depth 2."""
        return f"{self.name.removeprefix('model.')} {self.type}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["from"] = data.pop("from_")
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LayerInfo:
        data = dict(data)
        data["from_"] = data.pop("from")
        return cls(**data)


def _type_names(module: torch.nn.Module) -> tuple[str, str]:
    qualified = getattr(module, "type", None)
    if not isinstance(qualified, str):
        qualified = _script_class(module) or f"{type(module).__module__}.{type(module).__qualname__}"
    return qualified.rsplit(".", 1)[-1], qualified


def _script_class(module: Any) -> str | None:
    """A TorchScript module's eager class, qualified ("__torch__.ultralytics.nn.modules.conv.___torch_mangle_5.Conv"
    -> "ultralytics.nn.modules.conv.Conv"); None for an eager module."""
    c_module = getattr(module, "_c", None)
    if not isinstance(getattr(module, "original_name", None), str) or c_module is None:
        return None
    name = str(c_module._type().qualified_name())
    parts = [p for p in name.split(".") if p != "__torch__" and not p.startswith("___torch_mangle")]
    return ".".join(parts)


def _from_edges(module: torch.nn.Module) -> list[int]:
    f = getattr(module, "f", -1)
    return [int(v) for v in f] if isinstance(f, list | tuple) else [int(f)]


def _tensors(value: Any) -> list[torch.Tensor]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def _nbytes(tensors: Sequence[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _row(name: str, index: int, module: torch.nn.Module) -> LayerInfo:
    """A layer's row from the module alone: names, class, parameters and weight bytes (from-edges for a
    top-level eager layer); shapes and bytes moved are filled by a forward, where one can see them."""
    short, qualified = _type_names(module)
    params = list(module.parameters())
    return LayerInfo(
        index=index,
        name=name,
        type=short,
        qualified_type=qualified,
        from_=_from_edges(module) if name.count(".") == 1 and _script_class(module) is None else [],
        params=sum(p.numel() for p in params),
        weight_bytes=_nbytes(params) + _nbytes(list(module.buffers())),
        depth=name.count("."),
    )


@dataclass
class LayerRecorder:
    """The table's rows, their shapes and bytes filled by forward hooks that only record: on hwprof's own forward
    (layer_table), or on the first call of a user's program that follows (hwprof.session.program_pass_runner), so
    that hwprof runs no forward of its own inside the program's calls."""

    rows: list[LayerInfo]
    handles: list[Any]
    seen: bool = False
    """A forward went through the hooks: every row that ran has its shapes."""
    depth: int = 1
    """The depth its rows were made at (layer_modules')."""

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles.clear()

    def recount(self, model: torch.nn.Module) -> None:
        """Each row's parameters and weight bytes counted again from `model` (the forward's other hooks may have
        added one: the init's scale gives a bias-less convolution its bias)."""
        for row, (name, index, module) in zip(self.rows, layer_modules(model, self.depth), strict=True):
            fresh = _row(name, index, module)
            row.params, row.weight_bytes = fresh.params, fresh.weight_bytes


@dataclass(frozen=True)
class LayerTable:
    """A layer table recorded on a forward of `input_shape` at `depth` (the model's own, hwprof.workload.zoo's
    BuiltModel.layers)."""

    input_shape: list[int]
    depth: int
    rows: list[LayerInfo]


def record_layers(model: torch.nn.Module, depth: int = 1) -> LayerRecorder:
    """The rows, with hooks that fill each layer's shapes and bytes at the next forward through `model`."""
    recorder = LayerRecorder([], [], depth=depth)
    for name, index, module in layer_modules(model, depth):
        row = _row(name, index, module)
        recorder.rows.append(row)

        def hook(_m: Any, inputs: Any, output: Any, _row: LayerInfo = row) -> None:
            ins, outs = _tensors(inputs), _tensors(output)
            _row.in_shapes = [list(t.shape) for t in ins]
            _row.out_shapes = [list(t.shape) for t in outs]
            _row.in_bytes = _nbytes(ins)
            _row.out_bytes = _nbytes(outs)
            recorder.seen = True

        recorder.handles.append(module.register_forward_hook(hook))
    return recorder


def layer_table(model: torch.nn.Module, sample: torch.Tensor, depth: int = 1) -> list[LayerInfo]:
    """The table, with shapes from one forward pass of `sample` through `model`."""
    recorder = record_layers(model, depth)
    forward_with_hooks(model, sample, recorder.handles)
    return recorder.rows


def scripted_layer_table(model: torch.nn.Module, depth: int = 1) -> list[LayerInfo]:
    """The table of a TorchScript model: names, classes, parameters and weight bytes; no shapes, bytes moved or
    from-edges (see the module's docstring)."""
    rows = [_row(name, index, module) for name, index, module in layer_modules(model, depth)]
    for row in rows:
        row.in_bytes = row.out_bytes = None
    return rows


def forward_with_hooks(module: torch.nn.Module, batch: Any, handles: list[Any]) -> None:
    """One forward in inference mode with these hooks in place; they are removed after it, also on failure."""
    import torch

    try:
        with torch.inference_mode():
            module(batch)
    finally:
        for handle in handles:
            handle.remove()
