"""Busy neighbours: CPU time that processes outside a run's own process tree took on the run's CPUs.

A pass's timings are only as good as the CPUs were free. Hypervisor steal (steal.py) is one
thief; other processes of the same host are the other, and /proc shows both:
- /proc/stat's cpuN lines give each CPU's busy time (user+nice+system+irq+softirq+steal), summed
  here over the CPUs the run may use (its affinity);
- /proc/<pid>/stat gives each process's utime+stime (and its reaped children's cutime+cstime).
Other work over a window = the CPUs' busy time less the CPU time of the run's own tree (the
`hwprof collect` process, its workers and every descendant, reaped ones through cutime+cstime).
Both come in USER_HZ ticks, so a window's figure is known to about a tick per CPU and per process
at each end. A member that leaves the tree unreaped by it (its parent died first) keeps its ticks in the
tree's sum (left_unreaped). The names of the outside processes that took most come from a low-rate background
scan of /proc/<pid>/stat (every SAMPLE_S): a process that lived between two scans is in the
total but not in the names.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hwprof.perf.steal import BUSY_COLUMNS, STEAL_COLUMN, cpus_ns, tick_ns

SAMPLE_S = 0.5
"""Between two scans of /proc/<pid>/stat. One scan costs about 20 us of CPU per process (measured
here: 1.7 ms for 88 processes), so 0.3% of one CPU at this rate on such a host, in the session
process (its own tree: not counted as other work)."""
TOP = 3


@dataclass
class Outsider:
    """A process outside the run's tree and the CPU time it took during the window."""

    name: str
    pid: int
    cpu_s: float

    def text(self) -> str:
        return f"{self.name} (pid {self.pid}) {self.cpu_s:.1f} s"


@dataclass
class NeighbourLoad:
    """Other work on the run's CPUs during one pass (run.json passes.<pass>.neighbours)."""

    wall_s: float
    cpus: list[int]
    """The CPUs the run may use (os.sched_getaffinity of the collecting process)."""
    other_cpu_s: float
    """Busy time of those CPUs less the run's own tree's CPU time (steal included), clamped at 0."""
    share: float
    """other_cpu_s / (wall_s x len(cpus)): the share of the run's CPUs' capacity others took, at most 1
    (/proc/stat's busy time and the tree's ticks are read apart, each to a tick: a short window on a saturated
    host once came out at 102%)."""
    steal_s: float | None
    """Hypervisor steal on those CPUs (part of other_cpu_s); None where /proc/stat has no steal column."""
    own_cpu_s: float
    top: list[Outsider] = field(default_factory=list)
    """Outside processes by CPU time during the window, most first (at most TOP)."""
    scans: int = 0

    def names(self) -> str:
        """The top outsiders with pid and CPU time, or '' when none was seen."""
        return ", ".join(o.text() for o in self.top)

    def short_names(self) -> str:
        """The top outsiders' names, each once, for a table cell."""
        return ", ".join(dict.fromkeys(o.name for o in self.top))

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["method"] = (
            "/proc/stat busy time of the run's CPUs less the CPU time of the run's own process tree; "
            f"names from /proc/<pid>/stat every {SAMPLE_S} s"
        )
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> NeighbourLoad:
        keys = cls.__dataclass_fields__
        load = cls(**{k: v for k, v in d.items() if k in keys and k != "top"})
        load.top = [Outsider(**o) for o in d.get("top", [])]
        return load


@dataclass(frozen=True)
class ProcStat:
    """The fields of /proc/<pid>/stat this module needs (times in ticks)."""

    pid: int
    name: str
    ppid: int
    ticks: int
    """utime + stime: the process's own CPU time, all its threads."""
    child_ticks: int
    """cutime + cstime: its children that it has reaped."""
    start: int
    """starttime: with pid, tells a reused pid apart."""
    cpu: int
    """The CPU it last ran on."""


def parse_stat(pid: int, text: str) -> ProcStat | None:
    """One /proc/<pid>/stat line. The name (comm) sits in parentheses and may hold spaces and
    parentheses itself, so the fields start after the last ')'."""
    left, right = text.find("("), text.rfind(")")
    if left < 0 or right < left:
        return None
    rest = text[right + 1 :].split()
    try:
        # rest[0] is field 3 (state): field n is rest[n - 3]
        return ProcStat(
            pid,
            text[left + 1 : right],
            int(rest[1]),
            int(rest[11]) + int(rest[12]),
            int(rest[13]) + int(rest[14]),
            int(rest[19]),
            int(rest[36]) if len(rest) > 36 else -1,
        )
    except (IndexError, ValueError):
        return None


def scan(proc: Path) -> dict[int, ProcStat]:
    """Every process's stat; one that exits while being read is skipped."""
    out: dict[int, ProcStat] = {}
    try:
        entries = os.listdir(proc)
    except OSError:
        return out
    base = str(proc)
    for entry in entries:
        if not entry.isdigit():
            continue
        try:  # os.open/os.read: a third of Path.read_text's CPU time per process
            fd = os.open(f"{base}/{entry}/stat", os.O_RDONLY)
            try:
                raw = os.read(fd, 4096)
            finally:
                os.close(fd)
        except OSError:
            continue
        stat = parse_stat(int(entry), raw.decode(errors="replace"))
        if stat is not None:
            out[stat.pid] = stat
    return out


def tree(procs: dict[int, ProcStat], root: int) -> set[int]:
    """root and every descendant of it among procs."""
    children: dict[int, list[int]] = {}
    for p in procs.values():
        children.setdefault(p.ppid, []).append(p.pid)
    out, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        out.add(pid)
        todo += children.get(pid, [])
    return out & (set(procs) | {root})


def tree_ticks(procs: dict[int, ProcStat], members: set[int]) -> int:
    """CPU ticks of a tree: each member's own and its reaped children's (a child reaped during a
    window moves from the tree's members into its parent's cutime, so the sum carries on)."""
    return sum(procs[p].ticks + procs[p].child_ticks for p in members if p in procs)


def left_unreaped(before: dict[int, ProcStat], now: dict[int, ProcStat]) -> int:
    """Ticks of the tree's members at the scan `before` that left it by `now` without their time reaching a
    member's cutime: a member that exits is reaped by its parent, whose cutime then carries its ticks, unless
    its parent died first (a worker the collect's zygote had not reaped when the zygote was killed: init reaps
    it, and its ticks left the tree's sum, which then fell: own CPU of -3.86 s in a pass stopped by two
    signals). Each vanished member's ticks at `before` are set against the cutime its nearest surviving
    ancestor gained since; what that gain does not cover is lost to the tree."""
    gone = {pid: p for pid, p in before.items() if pid not in now or now[pid].start != p.start}
    owed: dict[int | None, int] = {}
    for p in gone.values():
        up, seen = p.ppid, {p.pid}
        while up in gone and up not in seen:
            seen.add(up)
            up = gone[up].ppid
        keeper = up if up in now and up in before and now[up].start == before[up].start else None
        owed[keeper] = owed.get(keeper, 0) + p.ticks + p.child_ticks
    lost = 0
    for keeper, ticks in owed.items():
        gained = 0 if keeper is None else now[keeper].child_ticks - before[keeper].child_ticks
        lost += max(0, ticks - gained)
    return lost


class NeighbourWatch:
    """Start at a pass's start, stop at its end: the NeighbourLoad of the window between.

    root: the run's own process (the `hwprof collect` process); its tree is looked up at every scan,
    so workers started during the window are its own. also: another process whose tree is the run's own (the
    service `hwprof attach` measures inside). A background thread scans every interval_s.
    """

    def __init__(
        self,
        root: int | None = None,
        cpus: set[int] | None = None,
        interval_s: float = SAMPLE_S,
        proc: str | Path = "/proc",
        also: int | None = None,
    ) -> None:
        self.root = os.getpid() if root is None else root
        self.also = also
        self.cpus = set(os.sched_getaffinity(0)) if cpus is None else set(cpus)
        self.interval_s = interval_s
        self.proc = Path(proc)
        self._stat = str(self.proc / "stat")
        self._first: dict[tuple[int, int], ProcStat] = {}
        """An outside process at its first scan in the window."""
        self._last: dict[tuple[int, int], ProcStat] = {}
        self._new: set[tuple[int, int]] = set()
        """Outside processes that were not there at the window's start: all their time is in it."""
        self._own: set[tuple[int, int]] = set()
        self._members: dict[int, ProcStat] = {}
        """The own tree at the last scan."""
        self._lost = 0
        """Ticks of own members that left the tree unreaped by it since the start (left_unreaped)."""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start: tuple[float, int | None, int | None, int] | None = None
        self.scans = 0

    def _own_tree(self, procs: dict[int, ProcStat]) -> set[int]:
        own = tree(procs, self.root)
        return own if self.also is None else own | tree(procs, self.also)

    def _scan(self, first: bool = False) -> dict[int, ProcStat]:
        procs = scan(self.proc)
        own = self._own_tree(procs)
        members = {pid: procs[pid] for pid in own if pid in procs}
        with self._lock:
            self.scans += 1
            if not first:
                self._lost += left_unreaped(self._members, members)
            self._members = members
            for p in procs.values():
                key = (p.pid, p.start)
                if p.pid in own:
                    self._own.add(key)
                    continue
                if key not in self._first:
                    self._first[key] = p
                    if not first:
                        self._new.add(key)
                self._last[key] = p
        return procs

    def start(self) -> NeighbourWatch:
        procs = self._scan(first=True)
        own = tree_ticks(procs, self._own_tree(procs))
        self._start = (
            time.monotonic(),
            cpus_ns(BUSY_COLUMNS, self.cpus, self._stat),
            cpus_ns((STEAL_COLUMN,), self.cpus, self._stat),
            own,
        )
        if self.interval_s > 0:
            self._thread = threading.Thread(target=self._run, name="hwprof-neighbours", daemon=True)
            self._thread.start()
        return self

    def sample(self) -> None:
        """One scan of the processes now (the background thread's step)."""
        self._scan()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def stop(self) -> NeighbourLoad | None:
        """The window's load; None where /proc/stat did not say (no Linux /proc) or start() was not called."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._start is None:
            return None
        procs = self._scan()
        own_ticks = tree_ticks(procs, self._own_tree(procs)) + self._lost
        now = time.monotonic()
        busy = cpus_ns(BUSY_COLUMNS, self.cpus, self._stat)
        steal = cpus_ns((STEAL_COLUMN,), self.cpus, self._stat)
        t0, busy0, steal0, own0 = self._start
        if busy is None or busy0 is None or now <= t0:
            return None
        wall = now - t0
        own_s = (own_ticks - own0) * tick_ns() / 1e9
        other = max(0.0, (busy - busy0) / 1e9 - own_s)
        return NeighbourLoad(
            wall_s=round(wall, 3),
            cpus=sorted(self.cpus),
            other_cpu_s=round(other, 3),
            share=round(min(1.0, other / (wall * len(self.cpus))), 4),
            steal_s=None if steal is None or steal0 is None else round((steal - steal0) / 1e9, 3),
            own_cpu_s=round(own_s, 3),
            top=self._top(),
            scans=self.scans,
        )

    def _top(self) -> list[Outsider]:
        """Outside processes by CPU ticks between their first and last scan (all of them for one that
        started in the window) that last ran on one of the run's CPUs."""
        out = []
        with self._lock:
            for key, last in self._last.items():
                if key in self._own or (last.cpu not in self.cpus and last.cpu >= 0):
                    continue
                took = last.ticks - (0 if key in self._new else self._first[key].ticks)
                if took > 0:
                    out.append(Outsider(last.name, last.pid, round(took * tick_ns() / 1e9, 2)))
        out.sort(key=lambda o: (-o.cpu_s, o.pid))
        return out[:TOP]


UNAVAILABLE = {
    "status": "unavailable",
    "reason": "/proc/stat has no cpuN lines for the run's CPUs here (not Linux, or /proc not mounted)",
    "fix": "collect on Linux with /proc mounted",
}


def neighbours_json(load: NeighbourLoad | None) -> dict[str, Any]:
    """run.json passes.<pass>.neighbours: the load, or why there is none."""
    return load.to_dict() if load is not None else dict(UNAVAILABLE)
