"""The program's other models: modules it calls at the outermost level besides the measured one (a second
detector, a refiner, a re-identification model), each timed as a stage of its own, named as the program names it.

Until the warm-up ends the finder's global hooks count every outermost call (hwprof.program.finder); they come off
there (they put every module call on torch's slow path), and each other module the program called at the
outermost level gets a wrapper of its instance forward instead, as the measured model has: its calls go on being
counted (its RootCalls entry: the run states its true count, not its count until the warm-up's end), and each call
is the stage named after it (hwprof.stage: the driver's stage sink marks it inside an iteration, outside the
forward, on the model's thread). Without it, its time sat in "other" ("the program's own code"), unnamed. The
modules that hold the model (a wrapper whose forward calls it) and the model's own parts are not other models.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hwprof.core.program_spec import RESERVED_STAGES
from hwprof.program.finder import RootCalls
from hwprof.stage_api import stage
from hwprof.workload.script_scopes import class_name


@dataclass
class OtherModels:
    """The wrappers on the other models' forwards, and the stages they mark."""

    stages: dict[str, str] = field(default_factory=dict)
    """Stage name -> the module's label ("refiner (Sequential)")."""
    _undo: list[Callable[[], None]] = field(default_factory=list)

    def wrap(self, roots: list[RootCalls], model: Any, taken: set[str]) -> None:
        """Wrap each root module that is neither a part of `model` nor holds it; `taken`: stage names in use."""
        from hwprof.program.forward_wrap import wrap_forward

        parts = {id(m) for m in model.modules()} if hasattr(model, "modules") else {id(model)}
        for entry in roots:
            module = entry.module
            holds_model = hasattr(module, "modules") and any(m is model for m in module.modules())
            if id(module) in parts or holds_model:
                continue
            name = _stage_name(entry, taken | set(self.stages))
            self.stages[name] = entry.label()
            self._undo.append(wrap_forward(module, _counted(entry, name)))

    def close(self) -> None:
        for undo in self._undo:
            undo()
        self._undo = []


def _counted(entry: RootCalls, name: str) -> Callable[..., Any]:
    """Each call counted, and a stage through hwprof's stage gate (the driver's sink while the program runs)."""

    def call(forward: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        entry.calls += 1
        with stage(name):
            return forward(*args, **kwargs)

    return call


def _stage_name(entry: RootCalls, taken: set[str]) -> str:
    """The program's name for the module (its class where it names none), made unique among the stages."""
    base = "".join(c if not c.isspace() else "_" for c in (entry.name or class_name(entry.module)))
    name = base if base not in RESERVED_STAGES else f"{base}-model"
    n = 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    return name
