"""The trace as the Perfetto writer sees it: slices and callstack samples on tracks, per pass, with the nesting
levels of iterations, stages, layers and recorded spans.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeAlias

from hwprof.schema.host import HostDoc

LEVEL_ITERATION = 0
LEVEL_STAGE = 1
LEVEL_LAYER = 2
"""Depth-2 layers ("model.7.cv1") get LEVEL_LAYER + 1."""
LEVEL_RECORD = 10
"""Recorded spans rank below every marker: where they disagree at a boundary, the marker wins."""
SYNTHETIC_PID_BASE = 1 << 22
"""Above Linux's largest pid_max (2^22), so a made-up pid can never be a real one."""
STACK_CATEGORIES = frozenset({"py-spy"})
"""Span categories that are sampled call stacks (nested frames or one span per sample): drawn as
one slice per run of an unchanged stack, named by its innermost frame, the stack in args."""
STACK_SEGMENT = 8
"""A stack is written as segments of this many frames (root first, " > " between frames): the
segments repeat across samples and iterations, so interned they cost a few bytes a sample."""
UI_MODE_PREFIXES = ("power", "psi")
"""Older Perfetto UIs draw a counter whose name matches ^power. or ^psi. as a rate (its slope),
not its value (ui/src/tracks/counter: COUNTER_REGEX); such names get their collector in front."""

ArgValue: TypeAlias = "str | int | float | bool | dict[str, ArgValue] | None"
"""A value among a slice's arguments: a scalar, or a group of named values (drawn nested in the UI)."""
SliceArgs: TypeAlias = dict[str, ArgValue]
"""The arguments the trace shows on a slice (Perfetto debug annotations), name -> value."""


def arg_group(args: SliceArgs, name: str) -> SliceArgs:
    """The group of arguments `name` in `args` (added, empty, where it is not yet)."""
    group = args.setdefault(name, {})
    assert isinstance(group, dict), name
    return group


@dataclass(slots=True)
class Slice:
    start: int
    end: int
    name: str
    category: str
    level: int
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class CallstackSample:
    """One thread's callstack at one instant: drawn where it was taken, never as a span."""

    ts: int
    tid: int
    cpu: int | None
    frames: tuple[tuple[str, str], ...]
    """(function, library), root first."""
    period: int | None = None
    """The sampling event's count since the thread's previous sample; None where not recorded."""


@dataclass
class SliceTrack:
    key: str
    name: str
    tid: int | None = None
    """Set for thread tracks; None for a named track inside the process."""
    slices: list[Slice] = field(default_factory=list)


@dataclass
class CounterTrack:
    name: str
    unit: str
    collector: str
    samples: list[tuple[int, float]] = field(default_factory=list)


@dataclass
class PassTimeline:
    name: str
    pid: int
    pid_source: str
    title: str
    main_tid: int
    threads: dict[int, str]
    slice_tracks: list[SliceTrack]
    counter_tracks: list[CounterTrack]
    start: int
    end: int
    samples: list[CallstackSample] = field(default_factory=list)
    """In time order."""


@dataclass
class Timeline:
    run_id: str
    metadata: SliceArgs
    """The run's identity as the run slice's arguments (hwprof.trace.tracks.run_metadata)."""
    passes: list[PassTimeline]
    start: int
    end: int
    notes: list[str] = field(default_factory=list)
    sampling_event: str | None = None
    """The perf event the CPU samples were taken on (the perf sampling collector's summary)."""
    model_name: str | None = None
    """run.json's model.name, for the run's title."""
    host: HostDoc = field(default_factory=HostDoc)
    """run.json's host: the trace's system info (uname, hostname) and the run's title."""
