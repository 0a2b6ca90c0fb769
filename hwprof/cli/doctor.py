"""`hwprof doctor`: what this host can measure. It opens with a verdict line (how many collectors measure here, which
do not, which only in part), then each collector's status with its reason and fix, the runtimes and precisions, and
where the caches are. For a run on the CPU the GPU collectors are one line, not probed: each said "the run is on the
CPU" with a fix to rerun with --device cuda, which no host without a GPU can follow.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.console import Console

from hwprof.core.config import RunConfig, default_threads

if TYPE_CHECKING:
    from hwprof.collectors.base import Collector
    from hwprof.render.status_block import StatusRow
    from hwprof.schema.probes import ProbeDetails


@dataclass
class Probed:
    """The collectors probed, as the verdict counts them."""

    rows: list[StatusRow] = field(default_factory=list)
    available: list[str] = field(default_factory=list)
    unavailable: list[str] = field(default_factory=list)
    partly: dict[str, int] = field(default_factory=dict)
    """A collector that works with some of its parts unavailable -> how many."""

    def verdict(self) -> str:
        total = len(self.available) + len(self.unavailable)
        words = [f"verdict: {len(self.available)} of {total} collectors measure here"]
        if self.unavailable:
            words.append(f"not: {', '.join(self.unavailable)}")
        if self.partly:
            words.append("in part: " + ", ".join(f"{name} ({n} unavailable)" for name, n in self.partly.items()))
        return "; ".join(words) + (" (reasons and fixes below)" if self.unavailable or self.partly else "")


def add_doctor_args(doctor: argparse.ArgumentParser) -> None:
    """`hwprof doctor`: the counter backend and device to check, and the peak measurement."""
    doctor.add_argument("--counters", choices=("perf", "papi", "ncu"), default="perf", help="counter backend to check")
    doctor.add_argument("--device", default="cpu", help="cpu, or cuda[:N]: what the GPU collectors could do there")
    doctor.add_argument("--peaks", action="store_true", help="measure (or show the cached) peak GFLOP/s and GB/s")
    doctor.add_argument("--force", action="store_true", help="with --peaks: measure again")
    doctor.add_argument("--threads", type=int, default=default_threads(), help="with --peaks: torch threads")


def cmd_doctor(args: argparse.Namespace, console: Console) -> int:
    from hwprof.render.status_block import status_renderable
    from hwprof.session.registry import all_collectors

    if args.device != "cpu":
        from hwprof.hardware.gpu_device import require_cuda

        require_cuda(args.device)
    if args.peaks:
        _print_peaks(args, console)
    config = RunConfig(counters=args.counters, device=args.device)
    classes = all_collectors()
    gpu = [c.name for c in classes if c.needs_cuda] if args.device == "cpu" else []
    probed = probe_all([c for c in classes if c.name not in gpu], config)
    console.print(probed.verdict(), highlight=False, markup=False)
    console.print(status_renderable("what this host can measure", probed.rows, console.width))
    if gpu:
        console.print(
            f"GPU collectors ({', '.join(gpu)}): not probed, for a run on the CPU; `hwprof doctor --device cuda` on a "
            "host with an NVIDIA GPU says what they measure there",
            highlight=False,
            markup=False,
        )
    console.print(_runtimes_table(args.device))
    console.print(_cache_line(), highlight=False, markup=False)
    return 0


def _print_peaks(args: argparse.Namespace, console: Console) -> None:
    """--peaks: the GPU's (--device cuda) or this host's measured peaks (cached, unless --force)."""
    if args.device != "cpu":
        from hwprof.hardware.gpu_peaks import load_or_measure

        gpu = load_or_measure(int(args.device.partition(":")[2] or 0), force=args.force)
        console.print_json(json.dumps(gpu))
        return
    from hwprof.core.host import cpuinfo_text
    from hwprof.hardware.machine import measure_peaks
    from hwprof.hardware.paper_peak import paper_peak
    from hwprof.render.roof_lines import peaks_renderable

    peaks = measure_peaks(args.threads, force=args.force)
    console.print(peaks_renderable(peaks, paper_peak(cpuinfo_text(), args.threads)))


def probe_all(classes: list[type[Collector]], config: RunConfig) -> Probed:
    """Each collector probed (a probe that raises is a row saying so), with its unavailable parts."""
    from hwprof.render.status_block import StatusRow

    probed = Probed()
    for cls in classes:  # one after the other: side by side, doctor died of SIGSEGV or SIGABRT 1 time in 6 here
        try:
            cap = cls.probe(config)
        except Exception as exc:
            probed.rows.append(
                StatusRow(cls.name, cls.pass_name, "[red]probe failed[/]", f"{type(exc).__name__}: {exc}")
            )
            probed.unavailable.append(cls.name)
            continue
        status = "[green]available[/]" if cap.available else "[yellow]unavailable[/]"
        if cap.available and not cls.wanted(config):
            status = "[green]available[/] (off by default)"
        (probed.available if cap.available else probed.unavailable).append(cls.name)
        probed.rows.append(StatusRow(cls.name, cls.pass_name, status, cap.reason, cap.fix))
        parts = unavailable_parts(cap.details)
        for names, reason, fix in parts:
            probed.rows.append(
                StatusRow("", "", f"[yellow]{len(names)} unavailable[/]", f"{', '.join(names)}: {reason}", fix)
            )
        if cap.available and parts:
            probed.partly[cls.name] = sum(len(names) for names, _, _ in parts)
    return probed


def _cache_line() -> str:
    """Where hwprof keeps its caches (peaks, models, valgrind), and how $XDG_CACHE_HOME was read."""
    from hwprof.core.envvars import cache_note, hwprof_cache

    note = cache_note()
    return f"cache: {hwprof_cache()}" + (f" ({note})" if note else "")


def _runtimes_table(device: str) -> Any:
    from rich.table import Table

    from hwprof.core.runtime_names import runs_on
    from hwprof.workload.runtime_probe import runtime_statuses

    table = Table(title=f"runtimes on {device} (collect --runtime R --precision P)", title_justify="left")
    for col in ("runtime", "version", "precisions", "note"):
        table.add_column(col, overflow="fold")
    for st in runtime_statuses():
        version = (st.version or "[yellow]unavailable[/]").split("-")[0]
        here = [p for p in st.precisions if runs_on(st.runtime, p, device)]
        elsewhere = [p for p in st.precisions if p not in here]
        other = "cuda" if device == "cpu" else "cpu"
        precisions = ", ".join(here) or "none here"
        if elsewhere:
            precisions += f" ({', '.join(elsewhere)}: --device {other} only)"
        table.add_row(st.runtime, version, precisions, st.note)
    return table


def unavailable_parts(details: ProbeDetails) -> list[tuple[list[str], str, str]]:
    """A collector that works in part lists what it cannot do in its details' unavailable: name -> why, fix."""
    parts: dict[tuple[str, str], list[str]] = {}
    for name, why in (details.unavailable or {}).items():
        parts.setdefault((why.reason or "", why.fix or ""), []).append(name)
    return [(names, reason, fix) for (reason, fix), names in parts.items()]
