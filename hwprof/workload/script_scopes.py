"""A TorchScript model's layers found again in torch.profiler's module hierarchy.

A traced or scripted module runs its children inside TorchScript: no Python hook or wrapper on them fires, so
hwprof's layer markers cannot be emitted as the layers run. TorchScript keeps the module scopes, and
torch.profiler with `with_modules=True` records, for each aten op the interpreter runs, the chain of module
calls it is in: `TOP(DetectionModel)::forward.2(C2f)::forward.0(Bottleneck)::forward.cv1(Conv)::forward.`.
Each level is the name the calling graph got the module by (its attribute name), its class and its method.

Three things make a level more than a path step:
- a layer list that its parent iterates in Python (`for m in self.model`, ultralytics and YOLOv7) is not
  called, so it has no level: `2(C2f)` sits right under the top. A name that is not a child of the module is
  looked up among the children of its container children (Sequential, ModuleList, ModuleDict);
- a module shared by several parents (ultralytics' one SiLU for every Conv) comes as INSTANCE_NAME_UNKNOWN:
  it is taken by its class among the parent's children when exactly one child has that class;
- the top is the outermost TorchScript module called, which may sit below the program's model (an eager
  wrapper around a traced model): it is matched by its class among the outermost scripted modules.

LayerScopes holds what that needs of the model (each module's children and class, and which paths are the
layers that hwprof's own runs name model.0, model.1 ...), built once in the worker from the live module
(`layer_scopes`); resolving a hierarchy string is pure and cached (a forward repeats a few hundred of them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from hwprof.core.markers import CONTAINERS, layer_list, layer_modules

UNKNOWN_INSTANCE = "INSTANCE_NAME_UNKNOWN"
_LEVEL = re.compile(r"(?:([^():]*)\(([^()]*)\))?::([^.:]*)\.")
"""One frame: `instance(Class)::method.`, or `::function.` for a TorchScript function (a scripted model's
F.silu) called from the frame before, which is no module level."""
_LISTS = (*CONTAINERS, "ModuleDict")
"""Containers a parent may iterate without calling them: their level is missing from the hierarchy."""
UNTRACED_FIX = "run the model untraced (YOLOv7's detect.py: --no-trace)"
"""The fix wherever a TorchScript model loses a per-layer figure."""
METHOD = (
    "torch.profiler with_modules=True: each aten op's TorchScript module hierarchy resolved to the layer it "
    "runs in; a layer span runs from the first to the last op of a stretch of that layer's ops"
)


@dataclass(frozen=True)
class Level:
    instance: str
    """The attribute name the caller got the module by ("0", "cv1"), TOP, or INSTANCE_NAME_UNKNOWN."""
    cls: str


@dataclass(frozen=True)
class OpScope:
    """The layer an op runs in, and its depth-2 child where the table goes that deep."""

    layer: str
    """"model.7" (or "model.<child>" for a model without a layer list)."""
    index: int
    child: str | None = None
    """"model.7.cv1", or None: the op runs in the layer itself, or the table stops at depth 1."""


def parse_hierarchy(text: str) -> list[Level]:
    """The module levels of a hierarchy string, outermost first; [] for a string of another form."""
    levels: list[Level] = []
    pos = 0
    for match in _LEVEL.finditer(text):
        if match.start() != pos:
            return []
        if match.group(2) is not None:
            levels.append(Level(match.group(1), _short_class(match.group(2))))
        pos = match.end()
    return levels if pos == len(text) else []


def _short_class(name: str) -> str:
    """A TorchScript class name without its module and mangling ("___torch_mangle_5.Conv" -> "Conv")."""
    return name.rsplit(".", 1)[-1]


@dataclass
class ModuleNode:
    cls: str
    scripted: bool
    children: dict[str, str] = field(default_factory=dict)
    """Child attribute name -> the child's path."""


@dataclass
class LayerScopes:
    """The model's module tree (paths from the program's model, "" for itself) and where its layers are."""

    nodes: dict[str, ModuleNode]
    layers: dict[str, tuple[str, int]]
    """Module path -> (layer name, top-level index), for every layer of the table (depth 1 and 2)."""
    _cache: dict[str, OpScope | None] = field(default_factory=dict, repr=False)

    @property
    def tops(self) -> list[str]:
        """The outermost TorchScript modules: the model itself, or scripted modules below eager ones."""
        parents = {child: path for path, node in self.nodes.items() for child in node.children.values()}
        return [
            path
            for path, node in self.nodes.items()
            if node.scripted and (path not in parents or not self.nodes[parents[path]].scripted)
        ]

    def scope_of(self, hierarchy: str) -> OpScope | None:
        """The layer (and child) an op with this module hierarchy runs in; None outside every layer."""
        if hierarchy not in self._cache:
            self._cache[hierarchy] = self._resolve(parse_hierarchy(hierarchy))
        return self._cache[hierarchy]

    def _resolve(self, levels: list[Level]) -> OpScope | None:
        child: str | None = None
        for path in reversed(self.called_paths(levels)):
            found = self.layers.get(path)
            if found is None:
                continue
            name, index = found
            if name.count(".") == 1:
                return OpScope(name, index, child)
            child = child or name
        return None

    def called_paths(self, levels: list[Level]) -> list[str]:
        """The paths of the modules the hierarchy's levels called, outermost first, as deep as they can be
        followed; [] when its top is not one of the model's TorchScript modules. A container iterated in
        Python is not among them (it was not called: hwprof's live markers give it no span either)."""
        if not levels:
            return []
        tops = [p for p in self.tops if self.nodes[p].cls == levels[0].cls]
        if not tops:
            return []
        paths = [tops[0]]
        for level in levels[1:]:
            step = self._child(paths[-1], level)
            if step is None:
                break
            paths.append(step)
        return paths

    def _child(self, path: str, level: Level) -> str | None:
        """The child a level names: by name, or by name inside a container child (several containers with
        that name: ambiguous, None), or, for a shared module, by its class when one child alone has it."""
        node = self.nodes[path]
        if level.instance != UNKNOWN_INSTANCE:
            if level.instance in node.children:
                return node.children[level.instance]
            inside = [
                self.nodes[inner].children[level.instance]
                for inner in node.children.values()
                if self.nodes[inner].cls in _LISTS and level.instance in self.nodes[inner].children
            ]
            return inside[0] if len(inside) == 1 else None
        same = [p for p in node.children.values() if self.nodes[p].cls == level.cls]
        return same[0] if len(same) == 1 else None


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def class_name(module: Any) -> str:
    """A module's class as the hierarchy names it: TorchScript keeps the eager class's name as `original_name`."""
    original = getattr(module, "original_name", None)
    return original if isinstance(original, str) else type(module).__name__


def layer_scopes(model: Any, layers_module: Any, depth: int = 1) -> LayerScopes:
    """The tree of `model` (the program's model) and the paths of the layers of `layers_module` (its layer
    table's module, hwprof.program.finder.layer_root), named as hwprof.core.markers.layer_modules names them."""
    import torch

    nodes: dict[str, ModuleNode] = {}
    where: dict[int, str] = {}

    def walk(module: Any, path: str) -> None:
        node = nodes[path] = ModuleNode(class_name(module), isinstance(module, torch.jit.ScriptModule))
        where.setdefault(id(module), path)
        for name, child in module.named_children():
            node.children[name] = _join(path, name)
            walk(child, node.children[name])

    walk(model, "")
    base = where.get(id(layers_module), "")
    listed = layer_list(layers_module) is not None
    layers: dict[str, tuple[str, int]] = {}
    for name, index, _module in layer_modules(layers_module, depth):
        # a layer list's layer is named by its path ("model.7" is model.model[7]); other children get "model."
        path = _join(base, name if listed else name.removeprefix("model."))
        if path in nodes:
            layers[path] = (name, index)
    return LayerScopes(nodes, layers)
