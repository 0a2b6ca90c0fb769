"""py-spy's outputs read: frames (Python or native, by library) and chrometrace stacks per thread.

py-spy's chrometrace `ts` is microseconds since py-spy created its recorder; consecutive samples of
a thread with the same stack emit nothing, so a stack's B..E interval covers every sample that saw
it (a Segment). Native frames carry the library (libtorch_cpu, libgomp, libc ...); oneDNN is linked
statically into libtorch_cpu, so `dnnl::` symbols are reported as library "libdnnl (in
libtorch_cpu)" and code with no file mapping (oneDNN's JIT kernels) as "JIT code". A sample's
state is read from its leaf frame: `python`, `native`, or `waiting` (a leaf in the OpenMP runtime
or a known blocking call: futex, poll, sleep, condition wait, threading.wait; a heuristic, since
libgomp and libc are stripped here and their internal wait loops show as bare addresses).
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WAIT_SYMBOLS = re.compile(
    r"futex|pthread_cond_|sem_(timed)?wait|epoll_wait|^__?poll$|^poll$|^select$|nanosleep|sched_yield"
    r"|gomp_.*barrier|gomp_.*wait|do_spin|do_wait"
)
WAIT_PYTHON = {
    ("wait", "threading.py"),
    ("sleep", ""),
    ("select", "selectors.py"),
    ("_wait_for_tstate_lock", "threading.py"),
}
THREAD_FRAME = re.compile(r"^thread \((\d+)\)(?::\s*(.*))?$")
UNRESOLVED = re.compile(r"^0x[0-9a-fA-F]+$")


@dataclass(frozen=True)
class Frame:
    name: str
    file: str
    line: int

    @property
    def is_python(self) -> bool:
        return self.file.endswith(".py") or self.file.startswith("<frozen") or self.file == "<string>"

    @property
    def library(self) -> str:
        """For a native frame: libtorch_cpu, libgomp, libc, libdnnl (in libtorch_cpu), JIT code."""
        if self.is_python:
            return "python"
        if self.name.startswith("dnnl::") or "dnnl::impl" in self.name:
            return "libdnnl (in libtorch_cpu)"
        if not self.file or self.file == "?":
            return "JIT code"
        base = os.path.basename(self.file)
        return base.split(".so")[0] if ".so" in base else base

    def label(self) -> str:
        if self.is_python:
            return f"{self.name} ({_short_path(self.file)}:{self.line})"
        if UNRESOLVED.match(self.name):
            return f"(no symbol) [{self.library}]"  # addresses differ per run (ASLR): one row per library
        return f"{self.name} [{self.library}]"


def _short_path(path: str) -> str:
    for anchor in ("site-packages/", "/hwprof/", "/lib/python3"):
        if anchor in path:
            tail = path.split(anchor, 1)[1]
            return ("hwprof/" + tail) if anchor == "/hwprof/" else tail
    return os.path.basename(path) or path


def leaf_state(stack: tuple[Frame, ...]) -> str:
    """python, native or waiting, by the leaf frame (a heuristic for waiting: see the module doc)."""
    if not stack:
        return "waiting"
    leaf = stack[-1]
    if leaf.is_python:
        base = os.path.basename(leaf.file)
        if (leaf.name, base) in WAIT_PYTHON or (leaf.name, "") in WAIT_PYTHON:
            return "waiting"
        return "python"
    if leaf.library == "libgomp" or WAIT_SYMBOLS.search(leaf.name):
        return "waiting"
    return "native"


# ----------------------------------------------------------------------------- chrometrace


@dataclass
class Segment:
    """One stack held by a thread from one recorded change to the next (one or more samples)."""

    tid: int
    start_us: int
    end_us: int
    prev_us: int | None
    """Time of the change before this one on the same thread (a sample without this stack)."""
    stack: tuple[Frame, ...]


@dataclass
class ThreadInfo:
    key: int
    """py-spy's thread key (a pthread id in 0.4.x, a small remapped id in later versions)."""
    os_tid: int | None
    name: str


@dataclass(frozen=True, slots=True)
class _Edge:
    """A chrome trace's "B" (a frame entered) or "E" (a frame left) event of one thread."""

    begin: bool
    ts: int
    name: str
    file: str
    line: int

    @classmethod
    def of(cls, event: Any) -> _Edge:
        args = event.get("args") or {}
        return cls(
            event["ph"] == "B",
            int(event["ts"]),
            str(event["name"]),
            str(args.get("filename", "")),
            int(args.get("line") or 0),
        )


def open_text(path: Path) -> Any:
    return gzip.open(path, "rt") if path.suffix == ".gz" else open(path)


def load_chrometrace(path: Path) -> tuple[list[Segment], dict[int, ThreadInfo]]:
    with open_text(path) as handle:
        events = json.load(handle)
    if isinstance(events, dict):
        events = events.get("traceEvents", [])
    if not isinstance(events, list):
        raise ValueError(f"{path}: not a chrome trace")
    threads: dict[int, ThreadInfo] = {}
    per_thread: dict[int, list[_Edge]] = defaultdict(list)
    interned: dict[tuple[str, str, int], Frame] = {}
    for event in events:
        tid = int(event.get("tid", 0))
        if event.get("ph") == "M" and event.get("name") == "thread_name":
            label = str(event.get("args", {}).get("name", ""))
            os_tid, _, name = label.partition(": ")
            threads[tid] = ThreadInfo(tid, int(os_tid) if os_tid.isdigit() else None, name)
        elif event.get("ph") in ("B", "E"):
            per_thread[tid].append(_Edge.of(event))
    segments: list[Segment] = []
    for tid, evs in per_thread.items():
        stack: list[Frame] = []
        current: int | None = None
        previous: int | None = None
        for edge in evs:
            ts = edge.ts
            if current is not None and ts != current:
                if stack:
                    segments.append(Segment(tid, current, ts, previous, tuple(stack)))
                previous = current
            current = ts
            name, file, line = edge.name, edge.file, edge.line
            if edge.begin:
                match = THREAD_FRAME.match(name) if not file else None
                if match:
                    info = threads.get(tid)
                    if info is None or info.os_tid is None:
                        threads[tid] = ThreadInfo(tid, int(match.group(1)), match.group(2) or "")
                    stack.append(Frame(name, "", 0))
                    continue
                key = (name, file, line)
                stack.append(interned.setdefault(key, Frame(name, file, line)))
            else:
                for depth in range(len(stack) - 1, -1, -1):
                    if stack[depth].name == name:
                        del stack[depth:]
                        break
    for tid in per_thread:
        threads.setdefault(tid, ThreadInfo(tid, None, ""))
    for seg in segments:  # drop the thread pseudo-frame
        if seg.stack and THREAD_FRAME.match(seg.stack[0].name) and not seg.stack[0].file:
            seg.stack = seg.stack[1:]
    segments.sort(key=lambda s: (s.tid, s.start_us))
    return segments, threads
