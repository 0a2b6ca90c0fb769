"""What a program's pass gives of a TorchScript model's layers (torch.jit.trace or script): their spans from
torch.profiler's module hierarchy where a collector of the pass reads it, else what the pass cannot give per layer
and why."""

from __future__ import annotations

from hwprof.collectors.base import Collector
from hwprof.core.config import RunConfig
from hwprof.program.eager_parts import EagerLayer
from hwprof.program.finder import Found
from hwprof.session.registry import all_collectors

SCRIPTED_LAYERS = (
    "layers of the TorchScript model: spans made from torch.profiler's module hierarchy (with_modules) of each "
    "op in the {pass_name} pass, after it; the profiler is on in those iterations, so their cost is that pass's "
    "paired cost"
)
NO_SCRIPTED_LAYERS = (
    "no per-layer figures in this run: the model is TorchScript (traced or scripted), its layers run inside "
    "TorchScript, where hwprof's layer markers never fire, and no collector of this run reads torch.profiler's "
    "module hierarchy (torch_profiler, the trace pass), which gives their times; fix: {fix}, or add torch_profiler"
)
SCRIPTED_LOST = {
    "layers": "per-layer counters (perf_events, PAPI), energy and FLOPs",
    "kernels": "perf samples per layer",
}
"""What a pass that cannot place a TorchScript model's layer spans loses (by pass)."""


def scripted_note(collectors: list[Collector], pass_name: str, config: RunConfig) -> str | None:
    """What this pass gives of a TorchScript model's layers, in one line: their spans from torch.profiler's
    module hierarchy where a collector of the pass reads it, else what the pass cannot give per layer."""
    from hwprof.workload.script_scopes import UNTRACED_FIX

    if any(c.finds_scripted_layers for c in collectors):
        return SCRIPTED_LAYERS.format(pass_name=pass_name)
    if pass_name == "timing":
        if any(cls.finds_scripted_layers and cls.wanted(config) for cls in all_collectors()):
            return None  # a clean forward: the run's trace pass gives the layers' times
        return NO_SCRIPTED_LAYERS.format(fix=UNTRACED_FIX)
    lost = SCRIPTED_LOST.get(pass_name, "per-layer figures")
    return (
        f"{lost} of the {pass_name} pass: unavailable for a TorchScript model: its layers run inside "
        f"TorchScript, where no Python code runs at their boundaries (hwprof's layer markers never fire; its "
        f"per-layer times come from torch.profiler's module hierarchy in the trace pass); fix: {UNTRACED_FIX}"
    )


def eager_parts(collectors: list[Collector], found: Found, depth: int, notes: list[str]) -> list[EagerLayer]:
    """The layers a TorchScript model's eager wrapper runs itself (YOLOv7's TracedModel.detect_layer), in a pass
    that times the TorchScript layers: live markers beside the module hierarchy's spans (a note says which)."""
    from hwprof.program.eager_parts import describe, eager_layers

    if not any(c.finds_scripted_layers for c in collectors):
        return []
    eager = eager_layers(found.module, found.layers_module, depth)
    if eager:
        notes.append(describe(eager))
    return eager
