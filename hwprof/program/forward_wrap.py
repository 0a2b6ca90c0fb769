"""Seeing every call of one module instance: its forward routed through a callback, with the undo that gives it
back exactly. The pass's driver (hwprof.program.driver), hwprof advise's call counter (hwprof.program.advise_calls)
and the count of a program's other models (hwprof.program.other_models) all see the model's calls this way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def wrap_forward(module: Any, call: Callable[..., Any]) -> Callable[[], None]:
    """The instance's `forward` replaced by one that goes through `call` (as attach_layer_markers does for the
    layers: cheaper than hooks); a TorchScript module keeps its forward and gets forward hooks instead.
    Returns the undo."""
    import torch

    if isinstance(module, torch.jit.ScriptModule):
        return _hook_scripted(module, call)
    own = module.__dict__.get("forward")
    forward = module.forward

    def marked(*args: Any, **kwargs: Any) -> Any:
        return call(forward, *args, **kwargs)

    module.forward = marked

    def undo() -> None:
        if own is None:
            del module.forward
        else:
            module.forward = own

    return undo


def _hook_scripted(module: Any, call: Callable[..., Any]) -> Callable[[], None]:
    """A scripted module's forward cannot be replaced: its class's __call__ is wrapped for this instance alone."""
    cls = type(module)
    original = cls.__call__

    def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self is module:
            return call(lambda *a, **k: original(self, *a, **k), *args, **kwargs)
        return original(self, *args, **kwargs)

    cls.__call__ = patched

    def undo() -> None:
        cls.__call__ = original

    return undo
