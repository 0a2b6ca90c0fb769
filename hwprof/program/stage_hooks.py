"""Functions of the program wrapped so that each call is a stage: the known ones (hwprof.program.known_stages)
and the --stage ones, through hwprof.stage_api's gate, whose sink the pass's driver is.

A target is wrapped where its module is: at once for a module already imported, and for one the program imports
later, right after that module has run (a finder on sys.meta_path hands the import a loader that wraps once the
module's code is done), so that `from utils.general import non_max_suppression` in the program binds the
wrapper. A module-level function is replaced in its module and in every loaded module that had already bound
it under the same name. A method is replaced on its class, which covers the instances made before; a class that
refuses attribute assignment (a C type) is replaced in its module by a subclass that holds the wrapper, which
covers the instances made after. A target in the program's own script (its module names `__main__`, the
script's stem or the -m module) is wrapped at the model's first call, when the script's functions are defined.

Wrapping never fails the program: a target that does not resolve (no such module imported by the end, no such
attribute, not a function) is said in the pass's notes when the user named it with --stage.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import inspect
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from hwprof import stage_api
from hwprof.core.program_spec import StageTarget

MAIN = "__main__"


@dataclass
class Hooked:
    """One wrapped target: its calls, and how to put the original back."""

    target: StageTarget
    calls: int = 0
    undo: list[Callable[[], None]] = field(default_factory=list)


@dataclass
class StageHooks:
    """Wraps `targets` where their modules are, now and as they are imported; `close` puts every original back."""

    targets: Sequence[StageTarget]
    user: Sequence[StageTarget] = ()
    """The --stage targets (also in `targets`): those left unresolved are reported."""
    main_names: tuple[str, ...] = ()
    """What the program's own script is called besides __main__ (its stem, or the -m module)."""
    hooked: list[Hooked] = field(default_factory=list)
    problems: dict[StageTarget, str] = field(default_factory=dict)
    """Why a target that exists in name could not be wrapped (no such attribute, not callable)."""
    _pending: list[StageTarget] = field(default_factory=list)
    _finder: _AfterImport | None = None

    def install(self) -> None:
        self._pending = list(self.targets)
        watched = {t.module for t in self.targets} - {MAIN, *self.main_names}
        self._finder = _AfterImport(self._imported, watched)
        sys.meta_path.insert(0, self._finder)
        self.retry()

    def retry(self, main: bool = False) -> None:
        """Wrap every pending target whose module is loaded; `main`: the program's script is running (the model's
        first call), so the targets in the script itself are tried too, in its namespace."""
        for target in list(self._pending):
            if target.module in (MAIN, *self.main_names):
                if main and MAIN in sys.modules:
                    self._wrap(target, sys.modules[MAIN], script=True)
                continue
            module = sys.modules.get(target.module)
            if module is not None:
                self._wrap(target, module)

    def close(self) -> None:
        if self._finder is not None and self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)
        self._finder = None
        for hooked in reversed(self.hooked):
            for undo in reversed(hooked.undo):
                undo()

    def unresolved_targets(self) -> list[StageTarget]:
        """The --stage targets never wrapped."""
        wrapped = {h.target for h in self.hooked}
        return [t for t in self.user if t not in wrapped]

    def unresolved(self) -> list[str]:
        """One line per --stage target that was never wrapped, with the reason."""
        return [
            f"--stage {t.label} timed nothing: {self.problems.get(t) or f'the program never imported {t.module}'}"
            for t in self.unresolved_targets()
        ]

    def calls(self) -> dict[str, int]:
        """Calls of each wrapped function (every thread, the whole run), for those called at all."""
        return {h.target.label: h.calls for h in self.hooked if h.calls}

    def _imported(self, module: ModuleType) -> None:
        for target in list(self._pending):
            if target.module == module.__name__:
                self._wrap(target, module)

    def _wrap(self, target: StageTarget, module: ModuleType, script: bool = False) -> None:
        *path, attr = target.attr.split(".")
        owner: Any = module
        try:
            for part in path:
                owner = getattr(owner, part, None)
            found = owner is not None and hasattr(owner, attr)
        except Exception:  # a module's own __getattr__ may raise anything
            found = False
        self._pending.remove(target)
        if not found:
            where = "the program's script" if script else target.module
            self.problems[target] = f"{where} has no {target.attr}" + (" at the model's first call" if script else "")
            return
        hooked = Hooked(target)
        try:
            if isinstance(owner, type):
                _wrap_method(owner, attr, hooked, holder=module if len(path) == 1 else None)
            else:
                _wrap_function(owner, attr, hooked)
        except Exception as exc:  # wrapping runs inside the program's import: it must never fail it
            for undo in reversed(hooked.undo):
                undo()
            self.problems[target] = str(exc) if isinstance(exc, TypeError) else f"{type(exc).__name__}: {exc}"
            return
        self.hooked.append(hooked)


def _staged(function: Callable[..., Any], hooked: Hooked) -> Callable[..., Any]:
    """`function`, each call a stage through the gate (a plain call while no sink is set)."""
    name = hooked.target.stage

    @functools.wraps(function)
    def staged(*args: Any, **kwargs: Any) -> Any:
        sink = stage_api._sink
        if sink is None:
            return function(*args, **kwargs)
        hooked.calls += 1
        sink(name, "B")
        try:
            return function(*args, **kwargs)
        finally:
            sink(name, "E")

    return staged


def _wrap_function(owner: Any, attr: str, hooked: Hooked) -> None:
    original = getattr(owner, attr)
    if not callable(original):
        raise TypeError(f"{hooked.target.module}:{hooked.target.attr} is not a function")
    wrapper = _staged(original, hooked)
    _replace(owner, attr, wrapper, hooked)
    if isinstance(owner, ModuleType):  # names bound by `from module import function`, before and after
        _rebind(attr, original, wrapper, owner)
        hooked.undo.append(lambda: _rebind(attr, wrapper, original, owner))


def _rebind(attr: str, old: Any, new: Any, skip: ModuleType) -> None:
    """In every loaded module but `skip`, the name `attr` bound to `old` is bound to `new`."""
    for module in list(sys.modules.values()):
        try:
            bound = module is not skip and isinstance(module, ModuleType) and vars(module).get(attr) is old
        except TypeError:
            continue
        if bound:
            setattr(module, attr, new)


def _wrap_method(cls: type, attr: str, hooked: Hooked, holder: ModuleType | None) -> None:
    raw = inspect.getattr_static(cls, attr)
    if isinstance(raw, staticmethod | classmethod):
        wrapper: Any = type(raw)(_staged(raw.__func__, hooked))
    elif callable(raw):
        wrapper = _staged(raw, hooked)
    else:
        raise TypeError(f"{hooked.target.module}:{hooked.target.attr} is not a method")
    try:
        _replace(cls, attr, wrapper, hooked)
    except (TypeError, AttributeError):
        if holder is None or getattr(holder, cls.__name__, None) is not cls:
            raise TypeError(
                f"{hooked.target.module}:{hooked.target.attr}: its class refuses a new attribute and is not a "
                "name of its module"
            ) from None
        names = {attr: wrapper, "__module__": cls.__module__, "__qualname__": cls.__qualname__, "__doc__": cls.__doc__}
        subclass = type(cls.__name__, (cls,), names)
        _replace(holder, cls.__name__, subclass, hooked)
        _rebind(cls.__name__, cls, subclass, holder)
        hooked.undo.append(lambda: _rebind(cls.__name__, subclass, cls, holder))


def _replace(owner: Any, attr: str, value: Any, hooked: Hooked) -> None:
    """owner.attr = value, with its undo (an attribute it only inherited is deleted again). The undo leaves an
    attribute that the program set again since (ultralytics replaces some functions by its own) as it is."""
    scope = owner.__dict__
    own, before = attr in scope, scope.get(attr)
    setattr(owner, attr, value)

    def undo() -> None:
        if owner.__dict__.get(attr) is not value:
            return
        if own:
            setattr(owner, attr, before)
        else:
            delattr(owner, attr)

    hooked.undo.append(undo)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for a watched module it asks the finders after it, and gives the import a loader
    that calls `after(module)` once the module's code has run."""

    def __init__(self, after: Callable[[ModuleType], None], names: set[str]) -> None:
        self.after = after
        self.names = names

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is None:
                continue
            loader = spec.loader
            if loader is not None and hasattr(loader, "exec_module"):
                spec.loader = _ThenWrap(loader, self.after)
            return spec
        return None


class _ThenWrap(importlib.abc.Loader):
    """The module's own loader, then `after`; the module keeps its own loader as __loader__."""

    def __init__(self, loader: Any, after: Callable[[ModuleType], None]) -> None:
        self.loader = loader
        self.after = after

    def __getattr__(self, name: str) -> Any:
        """get_code, get_source, is_package, resources: the module's own loader's (runpy asks for get_code)."""
        if name == "loader":
            raise AttributeError(name)
        return getattr(self.loader, name)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        module: ModuleType | None = self.loader.create_module(spec)
        return module

    def exec_module(self, module: ModuleType) -> None:
        spec = module.__spec__
        if spec is not None:
            spec.loader = self.loader
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self.loader
        self.loader.exec_module(module)
        self.after(module)
