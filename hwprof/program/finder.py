"""Which torch module of a program is its model: the outermost module it calls repeatedly, or the one it names.

torch's global module hooks (`register_module_forward_pre_hook`) see every module call of the process. A call
made while no other module call is in flight on that thread is an outermost ("root") call. The model is the
first module whose root calls reach two (called repeatedly: a one-off call, a warm-up dummy or a module built
and called once, is not a model), or, with --program-model NAME, the module NAME resolves to in the program's own
code (its frames' locals, then globals: "model", "detector.model", "self.model"), called at any depth. Only the
program's frames are asked (hwprof.program.program_code): a library's names are its internals (ultralytics calls
each of its layers `m`). A name that gives different modules in the program's frames is ambiguous, and refused
with each candidate's file:line (class): when the call that would choose one is made (another frame gives the name
to another module), and through the warm-up after the choice (another module the name gives is called, not a part
of the chosen one: a layer that the program's own model code named first, before its `m = Model()` was bound).

A call made inside torch.jit.trace (tracing, or checking the trace) is the tracer's, not the program's: it is not
counted. A
program that warms its eager model up, or runs it once before tracing or scripting it, may call it twice before
its loop calls another module (the traced one): the choice is not final until the chosen module is called again.
A module whose first two root calls both come after the chosen one's last call, with the chosen one not called
since it was chosen, takes its place (the driver sets the pass up at the chosen module's first call after the
choice, so nothing has been set up yet); a module whose calls are interleaved with the chosen one's is ambiguous.

The global hooks put every module call on torch's slow call path, so they stay only until the warm-up ends
(ModelFinder.close): the model's own calls are then seen by a wrapper of its instance `forward`, as the layer
markers are (hwprof.core.markers.attach_layer_markers).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any

from hwprof.core.markers import CONTAINERS
from hwprof.program.program_code import TORCH_DIR, Place, library_frames, program_frames
from hwprof.workload.script_scopes import class_name

if TYPE_CHECKING:
    import torch

MAX_LAYER_HOPS = 3
"""How many `.model` attributes are followed to a YOLO model's layer list (AutoBackend -> DetectionModel)."""


class ProgramAbort(BaseException):
    """hwprof cannot measure this program; the message is one line. A BaseException, raised from inside the
    program's call of a module, so that the program's own `except Exception` does not swallow it: it ends the
    program, and the pass fails with its line."""


class AmbiguousModel(ProgramAbort):
    """Several modules are called repeatedly at the outermost level, or --program-model's name gives several."""


@dataclass
class RootCalls:
    """A module called at the outermost level: how often, and how the program names it."""

    module: Any
    calls: int = 0
    name: str | None = None
    first: int = 0
    """The program's root call (counting every module's) that was this module's first."""
    last: int = 0
    """The program's root call that was this module's latest."""

    def label(self) -> str:
        kind = class_name(self.module) + (", TorchScript" if is_scripted(self.module) else "")
        return f"{self.name} ({kind})" if self.name else kind


@dataclass
class Found:
    """The model, as the driver uses it."""

    module: Any
    name: str
    """How the program names it, or its class where no name reaches it."""
    why: str
    layers_module: Any
    """The module whose layers hwprof marks: an object with a `.model` layer list (YOLO), or the model itself."""
    layers_from: str
    scripted: bool
    root_calls_before: int = 0
    """Calls of the model up to the choosing one, which is included (its forward was bound before the hook)."""
    replaced: str | None = None
    """The module chosen first, which the program stopped calling when this one's calls began (its eager model,
    before the loop called the traced one)."""
    at: Place | None = None
    """The program's own line whose frame names the model, at the call that chose it (the line running there)."""


@dataclass
class ModelFinder:
    """Global hooks counting root calls until a model is chosen (`on_found`) and through the warm-up after it."""

    on_found: Callable[[Found, tuple[Any, ...]], None]
    """Called in the pre-hook of the choosing call, before that call's forward runs, with its arguments."""
    model_path: str | None = None
    roots: dict[int, RootCalls] = field(default_factory=dict)
    found: Found | None = None
    _root_calls: int = 0
    """Root calls of every module so far (RootCalls.first and .last count in it)."""
    _chosen_at: int = 0
    """The root call that chose `found` (by repetition)."""
    _local: threading.local = field(default_factory=threading.local)
    _handles: list[Any] = field(default_factory=list)
    _parts: set[int] = field(default_factory=set)
    """ids of the chosen module's parts (itself included): the names its own code gives them are no rival."""
    end_elsewhere: Callable[[BaseException], None] = lambda exc: None
    """A refusal raised in a thread other than the main one is raised there too (hwprof.program.thread_stop)."""
    _library_named: Place | None = None
    """--program-model's name gave a called module in a library's frame alone (not taken): said if none is found."""

    def install(self) -> None:
        from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

        self._handles = [
            register_module_forward_pre_hook(self._pre),
            register_module_forward_hook(self._post, always_call=True),
        ]

    def close(self) -> None:
        """Remove the global hooks (the end of the warm-up, or the end of the program)."""
        for handle in self._handles:
            handle.remove()
        self._handles = []

    @property
    def installed(self) -> bool:
        return bool(self._handles)

    def _pre(self, module: Any, args: tuple[Any, ...]) -> None:
        try:
            self._choose_at(module, args)
        except ProgramAbort as exc:  # raised in the thread that calls the module: the main thread ends too
            self.end_elsewhere(exc)
            raise

    def _choose_at(self, module: Any, args: tuple[Any, ...]) -> None:
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        by_name = self.model_path is not None and id(module) not in self._parts
        if (by_name or not depth) and in_trace():
            return
        if by_name:
            self._by_name(module, args)
        if depth:
            return
        self._root_calls += 1
        entry = self.roots.get(id(module))
        if entry is None:
            entry = self.roots[id(module)] = RootCalls(module, name=name_in_caller(module), first=self._root_calls)
        entry.calls += 1
        entry.last = self._root_calls
        if self.model_path is not None or entry.calls != 2 or (self.found is not None and module is self.found.module):
            return
        # named where the program calls it now: its first call may have been a library's (ultralytics' fuse()
        # profiles the model it fuses, from a frame that names it `m`)
        entry.name = name_in_caller(module) or entry.name
        why = "the outermost torch module the program calls repeatedly"
        if self.found is None:
            self._choose(module, entry.name, why, args, 2)
            return
        chosen = self.roots[id(self.found.module)]
        if chosen.last == self._chosen_at < entry.first:
            replaced = chosen.label()
            self._choose(module, entry.name, f"{why}; it replaced {replaced}, not called since", args, 2)
            self.found.replaced = replaced
            return
        others = [e for e in self.roots.values() if e.calls >= 2]
        raise AmbiguousModel(
            f"the program calls {len(others)} torch modules repeatedly at the outermost level: "
            + ", ".join(e.label() for e in others)
            + "; name the model with --program-model NAME (e.g. --program-model "
            + (others[-1].name or "detector.model")
            + ")"
        )

    def _post(self, _module: Any, _args: Any, _output: Any) -> None:
        self._local.depth = max(getattr(self._local, "depth", 1) - 1, 0)

    def _by_name(self, module: Any, args: tuple[Any, ...]) -> None:
        """--program-model: the named module, once the program's own names reach it; refused where they give
        several modules (and, after the choice, where they give another called module not a part of it)."""
        assert self.model_path is not None
        named = named_modules(self.model_path, program_frames(sys._getframe(1)))
        place = named.get(id(module))
        if place is None:
            if self.found is None and self._library_named is None:
                self._library_named = _named_in_library(self.model_path, module)
            return
        if self.found is None and len(named) == 1:
            self._choose(module, self.model_path, "named with --program-model", args, 1, at=place[0])
            return
        chosen = [] if self.found is None else [(self.found.at, self.found.module)]
        rivals = chosen + [(at, m) for at, m in named.values() if self.found is None or m is not self.found.module]
        raise AmbiguousModel(
            f"--program-model {self.model_path} names {len(rivals)} different modules in the program's code: "
            + ", ".join(f"{at} ({class_name(m)})" for at, m in rivals)
            + f"; give the model a name no other module of the program has (or a dotted path to it, such as "
            f"holder.{self.model_path.rsplit('.', 1)[-1]})"
        )

    def _choose(
        self, module: Any, name: str | None, why: str, args: tuple[Any, ...], calls: int, at: Place | None = None
    ) -> None:
        layers_module, layers_from = layer_root(module)
        self.found = Found(
            module=module,
            name=name or class_name(module),
            why=why,
            layers_module=layers_module,
            layers_from=layers_from,
            scripted=is_scripted(module) or is_scripted(layers_module),
            root_calls_before=calls,
            at=at or caller_place(),
        )
        self._chosen_at = self._root_calls
        self._parts = {id(m) for m in module.modules()} if hasattr(module, "modules") else {id(module)}
        self.on_found(self.found, args)

    def other_roots(self) -> dict[str, int]:
        """Modules other than the model and its parts called at the outermost level, and how often (a model's
        constructor may call its layers once: ultralytics' DetectionModel runs its forward to find its strides)."""
        part_of_model = {id(m) for m in self.found.module.modules()} if self.found is not None else set()
        return {e.label(): e.calls for key, e in self.roots.items() if key not in part_of_model}

    def never_found(self) -> str:
        """Why no model was chosen, in one line (the program ended first)."""
        if self.model_path is not None:
            called = ", ".join(f"{label} {n} time(s)" for label, n in self.other_roots().items()) or "no torch module"
            library = (
                f"; only a library's code named a called module {self.model_path}, at {self._library_named} "
                "(its own name, not the program's)"
                if self._library_named is not None
                else ""
            )
            return (
                f"--program-model {self.model_path} never named a module the program called (it called {called})"
                + library
            )
        if not self.roots:
            return "the program called no torch module: only whole-process figures (kernels, py-spy, Scalene)"
        return (
            "the program called no torch module more than once ("
            + ", ".join(e.label() for e in self.roots.values())
            + "): no model to measure; --program-model NAME names one"
        )


def in_trace() -> bool:
    """The call is torch.jit.trace's, not the program's: its tracing run, or its check_trace run of the eager
    module (outside the tracing state, from a frame of torch.jit.trace)."""
    import torch

    if torch.jit.is_tracing():
        return True
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name in _TRACE_FUNCTIONS and code.co_filename == _TRACE_FILE:
            return True
        frame = frame.f_back
    return False


_TRACE_FILE = str(TORCH_DIR / "jit" / "_trace.py")
_TRACE_FUNCTIONS = ("trace", "trace_module")


def is_scripted(module: Any) -> bool:
    import torch

    return isinstance(module, torch.jit.ScriptModule)


def layer_root(module: torch.nn.Module) -> tuple[Any, str]:
    """The module whose layers are marked: following `.model` to a YOLO model's layer list (named model.i as
    hwprof's own runs), else the module itself (its top-level children, named model.<child>)."""
    import torch

    current: Any = module
    for _ in range(MAX_LAYER_HOPS):
        inner = getattr(current, "model", None)
        if isinstance(inner, torch.nn.Sequential | torch.nn.ModuleList) or getattr(inner, "original_name", None) in (
            CONTAINERS
        ):
            path = "model" if current is module else "…model"
            return current, f"{path}.model (a YOLO model's layer list)"
        if not isinstance(inner, torch.nn.Module):
            break
        current = inner
    return module, "its top-level children"


def name_in_caller(module: Any) -> str | None:
    frame = _program_frame()
    return find_name(module, frame) if frame is not None else None


def caller_place() -> Place | None:
    """The program's own line running now, innermost: its call of the module."""
    frame = _program_frame()
    return Place.of(frame) if frame is not None else None


def _program_frame() -> FrameType | None:
    """The innermost frame of the program's own code: its call of the module."""
    return next(program_frames(sys._getframe(1)), None)


def named_modules(path: str, frames: Iterator[FrameType]) -> dict[int, tuple[Place, Any]]:
    """The modules a dotted name gives in these frames (a named module called at depth is called from its parent's
    forward, whose locals do not hold the program's name for it, so each frame outward is asked), by id, each
    with the innermost frame's place."""
    import torch

    out: dict[int, tuple[Place, Any]] = {}
    for frame in frames:
        value = resolve(path, frame)
        if isinstance(value, torch.nn.Module) and id(value) not in out:
            out[id(value)] = (Place.of(frame), value)
    return out


def _named_in_library(path: str, module: Any) -> Place | None:
    """Where a library's frame (not the program's) gives `path` to the module called now, if one does."""
    for frame in library_frames(sys._getframe(1)):
        if resolve(path, frame) is module:
            return Place.of(frame)
    return None


def find_name(target: Any, frame: FrameType) -> str | None:
    """How the code of `frame` names `target`: a local or global name, or one attribute below one."""
    for scope in (frame.f_locals, frame.f_globals):
        for name, value in list(scope.items()):
            if value is target:
                return name
        for name, value in list(scope.items()):
            attrs = getattr(value, "__dict__", None)
            if name.startswith("__") or not isinstance(attrs, dict) or isinstance(value, type):
                continue
            for attr, inner in list(attrs.items()):
                if inner is target:
                    return f"{name}.{attr}"
            modules = attrs.get("_modules")
            if isinstance(modules, dict):
                for attr, inner in modules.items():
                    if inner is target:
                        return f"{name}.{attr}"
    return None


def resolve(path: str, frame: FrameType) -> Any:
    """The object a dotted name gives in `frame` (its locals, then its globals), None where it does not."""
    head, *rest = path.split(".")
    for scope in (frame.f_locals, frame.f_globals):
        if head in scope:
            value: Any = scope[head]
            break
    else:
        return None
    for attr in rest:
        value = getattr(value, attr, None)
        if value is None:
            return None
    return value
