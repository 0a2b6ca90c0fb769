"""Which passes a run makes (the available collectors grouped by pass, the others with their reasons) and the run
directory it goes to.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from hwprof.collectors.base import Capability, Collector
from hwprof.core.config import PASS_ORDER, RunConfig
from hwprof.core.folders import make_folder
from hwprof.rundir.lock import LOCK_NAME, RunDirBusy, RunDirLock
from hwprof.schema.run import CollectorEntry
from hwprof.session.registry import all_collectors


class CollectError(RuntimeError):
    """A collection that cannot go on; the message is one line for the user."""


@dataclass
class PassPlan:
    name: str
    collectors: list[type[Collector]]


@dataclass
class Plan:
    passes: list[PassPlan]
    statuses: dict[str, CollectorEntry] = field(default_factory=dict)
    """Collectors that will not run, as run.json records them (status, reason, fix, pass)."""


GPU_ONLY = "a GPU collector: the run is on the CPU (--device cuda runs it)"
"""Why a GPU collector is skipped on a CPU run (skipped, not unavailable: the report's "not measured" line then
lists what this host could not measure, not the GPU collectors of every CPU run)."""


def _not_run(cls: type[Collector], status: str, reason: str, fix: str) -> CollectorEntry:
    return CollectorEntry.of(status=status, reason=reason, fix=fix, pass_name=cls.pass_name)


ATTACH_FIX = "run the service under `hwprof collect -- python SERVICE ...` for this collector's figures"


def plan_passes(config: RunConfig) -> Plan:
    """Probe every wanted collector and group the available ones into passes. The probes run side by side: most
    wait on a tool of their own (Scalene's help, py-spy dumping a child, perf), and one after the other they took
    about 2.5 s of every collect's start here (Scalene's 1.5 s of it)."""
    statuses: dict[str, CollectorEntry] = {}
    by_pass: dict[str, list[type[Collector]]] = {}
    wanted: list[type[Collector]] = []
    for cls in all_collectors():
        if not cls.wanted(config):
            statuses[cls.name] = _not_run(cls, "skipped", "not requested for this run", "")
        elif cls.needs_cuda and config.device == "cpu":  # not a measurement this host lacks: one for a GPU run
            statuses[cls.name] = _not_run(cls, "skipped", GPU_ONLY, "")
        elif cls.cannot_attach and config.attached is not None:
            statuses[cls.name] = _not_run(cls, "unavailable", cls.cannot_attach, ATTACH_FIX)
        else:
            wanted.append(cls)
    for cls, capability in zip(wanted, probe_each(wanted, config), strict=True):
        if isinstance(capability, Exception):  # a probe must not take the whole collection down
            statuses[cls.name] = _not_run(cls, "failed", f"probe raised {type(capability).__name__}: {capability}", "")
        elif not capability.available:
            entry = _not_run(cls, "unavailable", capability.reason, capability.fix)
            entry.update(details=capability.details)
            statuses[cls.name] = entry
        else:
            by_pass.setdefault(cls.pass_name, []).append(cls)
    passes = [PassPlan(name, by_pass[name]) for name in PASS_ORDER if name in by_pass]
    return Plan(passes, statuses)


def probe_each(wanted: list[type[Collector]], config: RunConfig) -> list[Capability | Exception]:
    """Each collector's probe, in threads (a collect's; `hwprof doctor` probes one after the other: side by side,
    its probes of every collector died of SIGSEGV or SIGABRT now and then); a probe's exception as its result.
    A stop signal while they run ends the wait at once (the probes' threads finish on their own: each is bounded
    by its tool's time-out). Side by side, the probes take as long as the slowest (Scalene's, which profiles a
    short program: about 2 s alone) instead of their sum."""

    def probe(cls: type[Collector]) -> Capability | Exception:
        try:
            return cls.probe(config)
        except Exception as exc:
            return exc

    pool = ThreadPoolExecutor(max_workers=max(len(wanted), 1), thread_name_prefix="hwprof-probe")
    try:
        return list(pool.map(probe, wanted))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def new_run_dir(root: Path, model: str) -> tuple[Path, RunDirLock]:
    """A fresh results/<model>-<time>[-n] directory, locked for this collect."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    base = root / f"{model}-{stamp}"
    candidate, n = base, 1
    make_folder(root, "--results")
    while True:
        try:
            candidate.mkdir()
        except FileExistsError:
            n += 1
            candidate = Path(f"{base}-{n}")
            continue
        return candidate, RunDirLock(candidate).acquire()


def claim_out_dir(out: Path) -> tuple[Path, RunDirLock]:
    """--out DIR: created if missing, locked for this collect (a second collect into it is refused with the
    holder's pid), and refused if it already holds anything but a stale lock left by a collect that died."""
    make_folder(out, "--out")
    try:
        lock = RunDirLock(out).acquire()
    except RunDirBusy as exc:
        raise CollectError(str(exc)) from None
    if any(p.name != LOCK_NAME for p in out.iterdir()):
        lock.release()
        died = f" (left by a collect, {lock.took_over.describe()}, that is gone)" if lock.took_over else ""
        raise CollectError(f"--out {out} already exists and is not empty{died}; refusing to overwrite an earlier run")
    return out, lock
