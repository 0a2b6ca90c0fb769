"""The program's child processes that call torch modules: which child called what, how often and for how long.

hwprof measures the model in the process it runs (its collectors follow that process: its markers, its counters,
its samples). A program may call its model in a child instead: a process it forks (os.fork, multiprocessing's
fork start method), or one multiprocessing spawns (a fresh interpreter). Such a child is not measured; it is
watched, so that the run says exactly which child called what (never "the program called no torch module" when
a child did) and how to measure it. The watch is torch's global module hooks, counting each module's outermost
calls and their time, the child's record rewritten after each (a forked child may end in os._exit, which runs
no exit handler): passes/<pass>/children/<pid>.json (hwprof.rundir.names.PROGRAM_CHILDREN).

Forked children get the watch from an at-fork handler (hwprof.session.program_pass_runner); spawned ones from
their command line: multiprocessing.spawn.get_command_line is wrapped while the program runs, so that the child
starts the watch before multiprocessing's own spawn_main.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hwprof.core.atomic import atomic_write_text
from hwprof.core.input_shapes import input_shape
from hwprof.program.finder import caller_place, name_in_caller
from hwprof.program.program_code import Place
from hwprof.workload.script_scopes import class_name


@dataclass
class ChildModule:
    """A module the child called at the outermost level."""

    label: str
    """"model (DetectionModel)": how the child's code names it, and its class."""
    calls: int = 0
    total_ms: float = 0.0
    """Its calls' time added up, as the watch's hooks saw it (not a measured pass: hwprof's collectors do not
    follow the child)."""
    shapes: dict[str, int] = field(default_factory=dict)
    """Its first tensor argument's shape -> calls."""
    part_of: str | None = None
    """Another module the child called holds this one (a model's constructor calls its layers once: a probe)."""


@dataclass
class ChildRecord:
    """One child process: how it was started, where, and the modules it called."""

    pid: int
    how: str
    """"fork" (os.fork, multiprocessing's fork), "spawn" (multiprocessing's spawn)."""
    at: str | None
    """The program's line that started it (file:line)."""
    process: str | None = None
    """multiprocessing's name for it and its target ("inference: model_in_child.child"), where it is one."""
    modules: dict[str, ChildModule] = field(default_factory=dict)


@dataclass
class ChildWatch:
    """In the child: torch's global module hooks, and its record rewritten after each outermost call."""

    folder: Path
    record: ChildRecord
    _local: threading.local = field(default_factory=threading.local)
    _handles: list[Any] = field(default_factory=list)
    _by_id: dict[int, ChildModule] = field(default_factory=dict)
    _parts: dict[int, set[int]] = field(default_factory=dict)
    """Each recorded module's submodules (ids)."""

    def install(self) -> None:
        from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

        self._handles = [
            register_module_forward_pre_hook(self._pre),
            register_module_forward_hook(self._post, always_call=True),
        ]

    def _pre(self, module: Any, args: tuple[Any, ...]) -> None:
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        if depth == 0:
            self._local.start = time.perf_counter_ns()
            self._local.args = args

    def _post(self, module: Any, _args: Any, _output: Any) -> None:
        depth = max(getattr(self._local, "depth", 1) - 1, 0)
        self._local.depth = depth
        if depth:
            return
        took = time.perf_counter_ns() - getattr(self._local, "start", time.perf_counter_ns())
        entry = self._by_id.get(id(module))
        if entry is None:
            name = name_in_caller(module)
            label = f"{name} ({class_name(module)})" if name else class_name(module)
            entry = self._by_id[id(module)] = self.record.modules.setdefault(label, ChildModule(label))
            self._mark_parts(module, entry)
        entry.calls += 1
        entry.total_ms += took / 1e6
        shape = input_shape(getattr(self._local, "args", ()))
        if shape:
            entry.shapes[shape] = entry.shapes.get(shape, 0) + 1
        try:
            self.write()
        except OSError as exc:  # the watch must not end the child: it is the program's, not hwprof's
            print(f"hwprof: the child's record was not written: {exc}", file=sys.stderr)

    def _mark_parts(self, module: Any, entry: ChildModule) -> None:
        """A new module: the recorded ones it holds are its parts, and it is a part of one that holds it."""
        inner = {id(m) for m in module.modules()} - {id(module)} if hasattr(module, "modules") else set()
        self._parts[id(module)] = inner
        for key, other in self._by_id.items():
            if key in inner:
                other.part_of = entry.label
            elif id(module) in self._parts.get(key, set()):
                entry.part_of = other.label

    def write(self) -> None:
        if self.record.process is None:
            self.record.process = _process_name()
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.folder / f"{self.record.pid}.json", json.dumps(asdict(self.record)))


def _process_name() -> str | None:
    """multiprocessing's name of this process and its target, where multiprocessing started it."""
    mp = sys.modules.get("multiprocessing")
    if mp is None or mp.parent_process() is None:
        return None
    process = mp.current_process()
    target = getattr(process, "_target", None)
    named = f"{target.__module__}.{target.__qualname__}" if target is not None else "run()"
    return f"{process.name}: {named}"


def watch_child(folder: Path | str, how: str, at: str | None) -> ChildWatch:
    """Start watching this process (a child of the program's)."""
    watch = ChildWatch(Path(folder), ChildRecord(pid=os.getpid(), how=how, at=at))
    watch.install()
    return watch


def fork_place() -> str | None:
    """The program's line running now (in an at-fork handler: its os.fork, or its Process.start())."""
    place: Place | None = caller_place()
    return str(place) if place is not None else None


@contextmanager
def spawned_children_watched(folder: Path) -> Iterator[None]:
    """While the program runs, multiprocessing's spawned children start the watch first."""
    from multiprocessing import spawn

    original: Callable[..., list[str]] = spawn.get_command_line

    def watched(**kwds: Any) -> list[str]:
        line = list(original(**kwds))
        if "-c" in line:
            i = line.index("-c") + 1
            line[i] = (
                f"from hwprof.program.child_watch import watch_child; "
                f"watch_child({str(folder)!r}, 'spawn', {fork_place()!r}); " + line[i]
            )
        return line

    spawn.get_command_line = watched
    try:
        yield
    finally:
        spawn.get_command_line = original


def read_children(folder: Path) -> list[ChildRecord]:
    """The children's records in the pass's folder (none where no child called a module); a damaged one is
    skipped (its child may have been killed while writing: the write is atomic, so only a foreign file is)."""
    out: list[ChildRecord] = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            raw = json.loads(path.read_text())
            modules = {k: ChildModule(**v) for k, v in raw.pop("modules").items()}
            out.append(ChildRecord(**raw, modules=modules))
        except (OSError, ValueError, TypeError, KeyError):
            continue
    return out


MEASURE_IN_PROCESS = (
    "hwprof measures the model in the process it runs: call the model in the program's own process (the child's "
    "work in the main process, e.g. a worker count of 0), or run the child's code as a program of its own under "
    "hwprof collect"
)
SHOWN_CHILDREN = 3


def children_text(records: list[ChildRecord]) -> str | None:
    """One line: which children called which modules, how often and how long per call; None where none did."""
    parts = [_child_text(r) for r in records if any(m.part_of is None for m in r.modules.values())]
    if not parts:
        return None
    more = f"; and {len(parts) - SHOWN_CHILDREN} more" if len(parts) > SHOWN_CHILDREN else ""
    return "; ".join(parts[:SHOWN_CHILDREN]) + more


def _child_text(record: ChildRecord) -> str:
    how = f"multiprocessing {record.how}" if record.process else f"os.{record.how}"
    started = f"{how} at {record.at}" if record.at else how
    process = f", process {record.process}" if record.process else ""
    ranked = sorted((m for m in record.modules.values() if m.part_of is None), key=lambda m: -m.calls)
    top = [m for m in ranked if m.calls * 2 >= ranked[0].calls][:2]  # not a model's constructor's probe of its parts
    called = ", ".join(
        f"{m.label} {m.calls} time{'s' if m.calls != 1 else ''} ({m.total_ms / m.calls:.3g} ms per call"
        + (f" at {', '.join(f'{shape} x{n}' for shape, n in m.shapes.items())}" if m.shapes else "")
        + ")"
        for m in top
    )
    return f"child pid {record.pid} ({started}{process}) called {called}"
