"""Stage and layer begin/end events: the one place every in-process collector subscribes to.

The pipeline emits stage markers, wrappers of the model's layers' forward emit layer markers, and
the worker emits iteration markers. Subscribers receive every marker synchronously, on the
thread that ran the code, with one CLOCK_MONOTONIC timestamp taken by the bus; a subscriber can
leave out the layer markers. No collector touches the model: what it needs about layers comes
from these markers and the layer table.

Nesting is symmetric: on a begin marker subscribers are called in subscription order, on an end
marker in reverse, so a subscriber registered first brackets the others (the counter reader,
which should see as little of the other subscribers' work as possible, subscribes last). The
marker log that keeps the spans (MarkerBus.keep_spans) is innermost of all.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from hwprof.core.input_shapes import InputTally
from hwprof.core.marker_order import marker_order_fault

if TYPE_CHECKING:
    import torch

Kind = Literal["iteration", "stage", "layer"]
Phase = Literal["B", "E"]

STAGES: tuple[str, ...] = ("load", "decode", "preprocess", "forward", "postprocess", "annotate", "encode")
"""The built-in pipeline's stages, each timed by a Pipeline method of the same name (hwprof.workload.pipeline)."""


@dataclass(slots=True, unsafe_hash=True)
class Marker:
    """One begin or end. Not frozen: a frozen dataclass's __init__ sets each field through
    object.__setattr__, 1.0 us against 0.2 us per marker here, paid twice per layer per forward
    in every collector pass; treat it as immutable (hashable by value, dataclasses.replace to change)."""

    kind: Kind
    phase: Phase
    name: str
    """Stage name, qualified layer name from the layer table ("model.7", "model.7.cv1"), or "iteration"."""
    t_ns: int
    """CLOCK_MONOTONIC nanoseconds."""
    iteration: int
    warmup: bool
    index: int = -1
    """Top-level layer index for layer markers, -1 otherwise."""
    replayed: bool = False
    """Made after the fact from a runtime's own profiler (ONNX Runtime, OpenVINO), or from torch.profiler's
    module hierarchy for a TorchScript model, not emitted live: such markers go to the marker log only, never to
    collectors (no counter is read at them)."""
    clean: bool = False
    """In a clean iteration of a paired pass (hwprof.session.paired): collectors and layer hooks off, only the
    iteration and stage markers time it. Not measured: it is the "off" side of the pass's own cost."""

    @property
    def measured(self) -> bool:
        """Neither warm-up nor a clean iteration: what the collectors measured."""
        return not self.warmup and not self.clean

    def to_row(self) -> list[Any]:
        row = [self.kind, self.phase, self.name, self.t_ns, self.iteration, int(self.warmup), self.index]
        if self.clean:
            return [*row, int(self.replayed), 1]
        return [*row, 1] if self.replayed else row

    @classmethod
    def from_row(cls, row: list[Any]) -> Marker:
        kind, phase, name, t_ns, iteration, warmup, index = row[:7]
        replayed = bool(row[7]) if len(row) > 7 else False
        clean = bool(row[8]) if len(row) > 8 else False
        return cls(kind, phase, str(name), int(t_ns), int(iteration), bool(warmup), int(index), replayed, clean)


Subscriber = Callable[[Marker], None]


class MarkerBus:
    """Fans markers out to subscribers; knows the current iteration and whether it is warm-up."""

    def __init__(self, clock: Callable[[], int] = time.monotonic_ns) -> None:
        self._subscribers: list[Subscriber] = []
        self._layer_subscribers: list[Subscriber] = []
        """Those of _subscribers that get the layer markers too, in the same order."""
        self._spans: Subscriber | None = None
        """The subscriber that keeps the spans (keep_spans)."""
        self._clock = clock
        self.iteration = -1
        self.warmup = False
        self.clean = False
        self.inputs = InputTally()
        """Each forward's input shape, as the workload tells it (input_shape)."""
        self.halted = False
        """Set when a pass is cut mid-iteration (a second stop signal): no marker reaches anyone after that,
        so no subscriber sees an end whose begin another subscriber missed; open begins stay unclosed."""
        self.owner: int | None = None
        """A thread's ident: markers from other threads are dropped (an attached service's window pinned to the
        thread its profiler measures, hwprof.agent.window); None: every thread's are kept."""

    def input_shape(self, shape: str | None) -> None:
        """The forward that just ended was given this input shape (the current iteration's)."""
        self.inputs.record(shape, self.iteration, self.warmup, self.clean)

    def subscribe(self, subscriber: Subscriber, layers: bool = True) -> None:
        """`layers` False: the stage and iteration markers only. A layer marker is emitted twice per layer per
        forward, so each subscriber called for it adds to every layer's span, whether or not it uses it."""
        self._subscribers.append(subscriber)
        if layers:
            self._layer_subscribers.append(subscriber)

    def keep_spans(self, log: Subscriber) -> None:
        """`log` keeps the spans (the marker log): it is called after every subscriber at a begin and before every
        one at an end, and a stage's or an iteration's begin reaches it stamped after the subscribers' work at it,
        so that a span holds none of the collectors' work at its own boundaries (their reads at the forward's
        begin took 75-120 us here, 1-2% of a GPU run's launch-bound forward). A layer's begin keeps the time
        of its emission: the layer markers are the hot path, and the reads between layers stay in the forward
        anyway."""
        self._spans = log

    def unsubscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.remove(subscriber)
        if subscriber in self._layer_subscribers:
            self._layer_subscribers.remove(subscriber)

    def emit(self, kind: Kind, phase: Phase, name: str, index: int = -1) -> Marker:
        marker = Marker(kind, phase, name, self._clock(), self.iteration, self.warmup, index, clean=self.clean)
        if self.halted or (self.owner is not None and threading.get_ident() != self.owner):
            return marker
        chosen = self._layer_subscribers if kind == "layer" else self._subscribers
        spans = self._spans
        if phase == "B":
            for subscriber in chosen:
                subscriber(marker)
            if spans is not None:
                if chosen and kind != "layer":
                    marker = Marker(
                        kind, phase, name, self._clock(), self.iteration, self.warmup, index, clean=self.clean
                    )
                spans(marker)
            return marker
        if spans is not None:
            spans(marker)
        for subscriber in reversed(chosen):
            subscriber(marker)
        return marker

    def emit_together(self, phase: Phase, nested: list[tuple[Kind, str]]) -> None:
        """Spans that begin (outermost first) or end (innermost first) at one instant: every subscriber is called
        as emit calls it, and the kept spans get one time for all, so that no piece lies between them (a
        whole-process run's iteration and its one stage: a sample in a gap of a few microseconds between two
        emits was attributed to no stage)."""
        order = nested if phase == "B" else nested[::-1]
        if self.halted:
            return
        if phase == "E":
            t_ns = self._clock()
        for kind, name in order:
            marker = Marker(kind, phase, name, self._clock(), self.iteration, self.warmup, clean=self.clean)
            for subscriber in self._subscribers if phase == "B" else reversed(self._subscribers):
                subscriber(marker)
        if phase == "B":
            t_ns = self._clock()
        if self._spans is not None:
            for kind, name in order:
                self._spans(Marker(kind, phase, name, t_ns, self.iteration, self.warmup, clean=self.clean))

    @contextmanager
    def span(self, kind: Kind, name: str, index: int = -1) -> Iterator[None]:
        self.emit(kind, "B", name, index)
        try:
            yield
        finally:
            self.emit(kind, "E", name, index)


class MarkerLog:
    """A subscriber that keeps every marker (the spans of a pass) and can append them to a file."""

    def __init__(self) -> None:
        self.markers: list[Marker] = []
        self._flushed = 0

    def __call__(self, marker: Marker) -> None:
        self.markers.append(marker)

    def flush_to(self, path: Any) -> None:
        """Append the markers not yet written as JSON lines, so a crash keeps what came before."""
        import json

        from hwprof.core.atomic import checked_append

        text = "".join(json.dumps(marker.to_row()) + "\n" for marker in self.markers[self._flushed :])
        with checked_append(path), open(path, "a") as out:
            out.write(text)
        self._flushed = len(self.markers)

    def discard_unflushed(self, iteration: int) -> int:
        """Forget the markers of `iteration` not yet written (an iteration the program ended inside); returns how
        many were forgotten."""
        kept = [m for m in self.markers[self._flushed :] if m.iteration != iteration]
        dropped = len(self.markers) - self._flushed - len(kept)
        self.markers[self._flushed :] = kept
        return dropped


def read_markers(path: Any) -> list[Marker]:
    """The markers of a markers.jsonl, up to a torn last line (see read_marker_file for its warning)."""
    return read_marker_file(path)[0]


PARSED_KEPT = 8
"""Marker files kept parsed (read_marker_file): a collect's finish and report read each pass's markers several
times over (the pass costs, the layer tables, the trace, a collector's conversion: 12 reads of 5 files in one
yolov7-tiny collect)."""
_parsed: dict[tuple[str, bytes], tuple[tuple[Marker, ...], str | None]] = {}


def read_marker_file(path: Any) -> tuple[list[Marker], str | None]:
    """The markers of a markers.jsonl and the warning for a torn last line (None when the file is whole).

    A row that is not a marker anywhere in the file, or markers that do not nest (an end before its begin, a
    layer ending outside its forward: hwprof.core.marker_order), raise RunDirError naming file:line. A file read
    before with the same bytes (their digest: an edit in place within the clock's tick keeps size and time) is
    not parsed again."""
    try:
        with open(path, "rb") as f:
            key: tuple[str, bytes] | None = (os.fspath(path), hashlib.file_digest(f, "blake2b").digest())
    except (OSError, TypeError):
        key = None  # read_jsonl says why
    if key is not None and key in _parsed:
        markers, warning = _parsed[key]
        return list(markers), warning
    parsed = _parse_marker_file(path)
    if key is not None:
        while len(_parsed) >= PARSED_KEPT:
            del _parsed[next(iter(_parsed))]
        _parsed[key] = (tuple(parsed[0]), parsed[1])
    return parsed


def _parse_marker_file(path: Any) -> tuple[list[Marker], str | None]:
    from hwprof.schema.check import RunDirError, found, read_jsonl

    lines = read_jsonl(path)
    rows: list[tuple[int, Marker]] = []
    for number, row in lines.rows:
        try:
            if not isinstance(row, list) or len(row) < 7:
                raise TypeError(f"found {found(row)}")
            rows.append((number, Marker.from_row(row)))
        except (ValueError, TypeError) as exc:
            raise RunDirError(
                f"{path}:{number}: expected a marker [kind, phase, name, t_ns, iteration, warmup, index] ({exc})"
            ) from exc
    fault = marker_order_fault(path, rows)
    if fault is not None:
        raise RunDirError(fault)
    return [m for _, m in rows], lines.warning()


def layer_modules(model: torch.nn.Module, depth: int = 1) -> list[tuple[str, int, torch.nn.Module]]:
    """(name, top-level index, module) for every layer the markers cover, in execution order.

    depth 1: the top-level layers `model.model[i]`, named "model.i". depth 2: also their direct
    children, named "model.i.child" (nested inside their parent's span). A model without a `.model` layer list
    (a user's program's own module) has its top-level children as layers, named "model.<child>".
    """
    seq = layer_list(model)
    if seq is not None:
        layers = [(f"model.{i}", layer) for i, layer in enumerate(seq)]
    else:
        layers = [(f"model.{name}", child) for name, child in model.named_children()]
    out: list[tuple[str, int, torch.nn.Module]] = []
    for i, (qualified, layer) in enumerate(layers):
        out.append((qualified, i, layer))
        if depth >= 2:
            for child_name, child in layer.named_children():
                out.append((f"{qualified}.{child_name}", i, child))
    return out


CONTAINERS = ("Sequential", "ModuleList")
"""A TorchScript copy of a layer list keeps its class only as `original_name` (a traced Sequential is a
TracedModule, neither iterable nor indexable)."""


def layer_list(model: Any) -> list[Any] | None:
    """The model's layer list `model.model` (a YOLO model's), eager or TorchScript, as a list; None when the model
    has none."""
    seq: Any = getattr(model, "model", None)
    if seq is None:
        return None
    scripted_class = getattr(seq, "original_name", None)
    if isinstance(scripted_class, str):
        return [child for _, child in seq.named_children()] if scripted_class in CONTAINERS else None
    if hasattr(seq, "__iter__"):
        return list(seq)
    return None


def layer_types(model: torch.nn.Module) -> dict[str, str]:
    """Each top-level layer's class name by its marker name (the GPU collectors' kernel tables)."""
    return {name: _class_name(module) for name, _, module in layer_modules(model)}


def _class_name(module: Any) -> str:
    """A module's class, a TorchScript copy's included (whose own class is RecursiveScriptModule)."""
    original = getattr(module, "original_name", None)
    return original if isinstance(original, str) else type(module).__name__


def attach_layer_markers(model: torch.nn.Module, bus: MarkerBus, depth: int = 1) -> Callable[[], None]:
    """Wrap each marked layer's forward to emit its begin and end markers; returns a function undoing it.

    Not forward hooks: a module with hooks takes torch's slow call path (_call_impl's hook handling), which
    cost 0.7-0.9 ms per forward of yolov7-tiny at 320 with 2 threads here against 0.35-0.43 ms for this
    wrapper doing the same marker work (the two alternating in ABBA blocks in one process, medians of 40
    blocks in each of two runs). The wrapper is the instance's `forward` attribute, which torch's module
    call looks up, so the markers still bracket exactly the layer's forward; a forward that a fuse step set
    on the instance (ultralytics sets `m.forward = m.forward_fuse`) is wrapped and put back on removal.
    No try/finally: a layer that raises leaves its begin unclosed, which the spans and the trace already
    mark ("unclosed") for a pass that stops mid-forward for any reason."""
    return attach_markers(layer_modules(model, depth), bus)


def attach_markers(layers: Iterable[tuple[str, int, torch.nn.Module]], bus: MarkerBus) -> Callable[[], None]:
    """attach_layer_markers on the given (name, index, module) layers: a TorchScript model's eager parts
    (hwprof.program.eager_parts)."""
    emit = bus.emit
    wrapped: list[tuple[torch.nn.Module, Any]] = []
    for name, index, module in layers:
        own = module.__dict__.get("forward")
        forward = module.forward

        def marked(*args: Any, _forward: Any = forward, _name: str = name, _index: int = index, **kwargs: Any) -> Any:
            emit("layer", "B", _name, _index)
            out = _forward(*args, **kwargs)
            emit("layer", "E", _name, _index)
            return out

        module.forward = marked
        wrapped.append((module, own))

    def remove() -> None:
        for module, own in reversed(wrapped):
            if own is None:
                del module.forward
            else:
                module.forward = own

    return remove
