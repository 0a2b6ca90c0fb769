"""A user's program that called no model: what its whole run spent its time on, from the collectors that need no
forward (perf's kernels over every thread, py-spy's Python functions, Scalene's lines).

Such a run has no forward, no layer and no stage but one, "program" (hwprof.session.program_pass_runner): its figures
are whole-process, and the report labels them so. Pure: read from the run directory's files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hwprof.core.native_view import KERNELS_FILE
from hwprof.core.program_spec import PROGRAM_SPAN
from hwprof.rundir.reader import records_files
from hwprof.schema.hotspots_file import HOTSPOTS_FILE, HotspotsFile
from hwprof.schema.kernels_file import KernelsFile
from hwprof.schema.records import Span, read_records
from hwprof.schema.summaries_tools import PyspySummary, ScaleneSummary

if TYPE_CHECKING:
    from hwprof.rundir.reader import RunData

TOP = 8
"""Rows per source."""
FORWARD_FRAME = ".forward"


@dataclass(frozen=True)
class WholeRow:
    """One kernel, function or line of the program's whole run."""

    source: str
    """"perf" (native kernels, every thread), "py-spy" (Python functions, main thread), "py-spy, modules" (module
    classes by their forward frames, every thread), "Scalene" (lines)."""
    name: str
    share: float | None
    """Of the source's sampled time over the run (Scalene: of its elapsed time)."""
    detail: str


@dataclass
class WholeProgram:
    reason: str
    """Why no model was measured (the pass's one line)."""
    rows: list[WholeRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Per source: what its shares are of, or why it has no rows."""


def whole_program(data: RunData) -> WholeProgram | None:
    """The whole-process view of a program without a model; None for any other run."""
    outcomes = [p.program for p in data.doc.passes.values() if p.program is not None]
    reason = next((o.no_model for o in outcomes if o.no_model), None)
    if reason is None or not any(o.whole_process for o in outcomes):
        return None
    view = WholeProgram(reason)
    _perf_rows(data, view)
    _pyspy_rows(data, view)
    _module_rows(data, view)
    _scalene_rows(data, view)
    return view


def _perf_rows(data: RunData, view: WholeProgram) -> None:
    doc = data.first_pass_json(KERNELS_FILE)
    if doc is None:
        return
    table = KernelsFile.from_json(doc, KERNELS_FILE).stages.get(PROGRAM_SPAN)
    if table is None or not table.samples:
        view.notes.append("perf: no sample fell inside the program's run")
        return
    for k in table.kernels[:TOP]:
        view.rows.append(WholeRow("perf", k.name, k.share, f"{k.library or '?'}, {k.kind or '?'}"))
    view.notes.append(f"perf: share of {table.samples} samples over every thread of the program's process")


def _pyspy_rows(data: RunData, view: WholeProgram) -> None:
    doc = data.first_pass_json(HOTSPOTS_FILE)
    if doc is None:
        return
    measured = HotspotsFile.from_json(doc, HOTSPOTS_FILE).measured
    for row in measured.python[:TOP]:
        ms = f"{row.ms_per_iter:.0f} ms" if row.ms_per_iter is not None else ""
        view.rows.append(WholeRow("py-spy", row.function, row.share, ms))
    total = measured.sampled_ms_per_iter
    view.notes.append(
        "py-spy: share of the main thread's sampled time by leaf Python function"
        + (f" ({total / 1e3:.1f} s sampled)" if total else "")
    )


def _module_rows(data: RunData, view: WholeProgram) -> None:
    """py-spy's `forward` frames on every thread, by the module class that defines them (py-spy names a frame by
    its qualified name: "C2f.forward"): each class's time inside its forwards (a class's forward inside another of
    its own counted once), as a share of the outermost forwards' time. Where no layer can be named (no model
    found, a process sampled from outside), the module classes that ran still are."""
    spans = [
        r
        for f in records_files(data.root)
        if f.collector == PyspySummary.NAME
        for r in read_records(f.path, containing=FORWARD_FRAME)
        if isinstance(r, Span) and module_class(r.name)
    ]
    times, outermost = forward_times(spans)
    if not outermost:
        return
    for name, ns in sorted(times.items(), key=lambda item: -item[1])[:TOP]:
        view.rows.append(WholeRow("py-spy, modules", f"{name}.forward", ns / outermost, f"{ns / 1e6:.0f} ms"))
    view.notes.append(
        "py-spy, modules: each module class's time inside its forward (the class that defines it, every thread), "
        f"of the outermost forwards' {outermost / 1e9:.1f} s"
    )


def module_class(frame: str) -> str | None:
    """ "C2f" for py-spy's "C2f.forward" (or "Conv.forward_fuse"); None for any other frame."""
    owner, dot, method = frame.rpartition(".")
    return owner if dot and owner and (method == "forward" or method.startswith("forward_")) else None


def forward_times(spans: list[Span]) -> tuple[dict[str, int], int]:
    """Per module class, the time of its forward spans not inside another of its own on the same thread; and the
    time of the spans inside no other forward (the models' calls)."""
    times: dict[str, int] = {}
    outermost = 0
    by_thread: dict[int | None, list[Span]] = {}
    for span in spans:
        by_thread.setdefault(span.tid, []).append(span)
    for thread_spans in by_thread.values():
        open_spans: list[tuple[int, str]] = []  # (end, class) of the spans around the next one
        for span in sorted(thread_spans, key=lambda s: (s.ts_ns, -s.dur_ns)):
            while open_spans and open_spans[-1][0] <= span.ts_ns:
                open_spans.pop()
            owner = module_class(span.name) or ""
            if not open_spans:
                outermost += span.dur_ns
            if all(name != owner for _, name in open_spans):
                times[owner] = times.get(owner, 0) + span.dur_ns
            open_spans.append((span.ts_ns + span.dur_ns, owner))
    return times, outermost


def _scalene_rows(data: RunData, view: WholeProgram) -> None:
    summary = data.doc.summary(ScaleneSummary)
    lines = summary.top_lines or []
    if not lines:
        return
    elapsed = summary.elapsed_s
    for line in lines:
        share = line.cpu_s / elapsed if elapsed else None
        view.rows.append(WholeRow("Scalene", line.where or "?", share, line.code or ""))
    view.notes.append("Scalene: a line's Python, native and system time over the profile's elapsed time")
