"""Runs side by side: headline figures, stages and layers with ratios to the first run.

Layers are matched by name (else by position: hwprof.analysis.layers.match says how), between runs of one
model or a program's model and a built-in one: a layer whose class differs between runs is still compared, its
row saying each run's class, and the layers not in every run are listed in one line. Runs of different built-in
models are refused layer by layer, with the reason, while their stages and headline figures are still compared.

Runs of one model on different runtimes or precisions (torch, ONNX Runtime, OpenVINO; fp32,
bf16, int8) compare layer by layer too: each layer gets its speed-up over run A and, per run, the
kernel that ran it (the runtime's own node kind, e.g. OpenVINO's `brgconv_avx512_bf16`, or for
torch the most sampled native kernel of the kernels pass) and the runtime nodes fused from several
layers it takes part in. Every run's head (hwprof.analysis.run_head) carries what executed and its output
against torch fp32.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from hwprof.analysis.layers.match import LayerMatch, letter, match_layers, row_instructions, row_time
from hwprof.analysis.layers.memory import ALLOC
from hwprof.analysis.run_analysis import Analysis, analyse
from hwprof.analysis.run_head import RunHead, head, layer_kernel
from hwprof.analysis.runtime_nodes import FusedGroup
from hwprof.analysis.stages import in_stage_order
from hwprof.core.host_kinds import differing_software, host_kind


@dataclass
class Row:
    key: str
    """Stage name, or the layer's "index type"."""
    values: list[float | None]
    ratios: list[float | None]
    """values[i] / values[0]; None where either is missing or the first is 0."""
    shares: list[float | None] = field(default_factory=list)
    speedups: list[float | None] = field(default_factory=list)
    """values[0] / values[i]: above 1, run i is faster than run A."""
    kernels: list[str] = field(default_factory=list)
    """Layers only: per run, the kernel that ran most of the layer ("" when not recorded)."""
    fused: list[list[str]] = field(default_factory=list)
    """Layers only: per run, the runtime nodes fused from several layers this layer takes part in."""
    unconfirmed: list[str] = field(default_factory=list)
    """Per run, why its ratio to run A is not a measured fact ("" where it is): a pass either run measured the
    row with was unfit for a verdict (hwprof.analysis.health); empty: none is."""


@dataclass
class Comparison:
    runs: list[RunHead]
    stages: list[Row]
    layers: list[Row] | None
    layers_refused: str | None
    notes: list[str]
    fused: list[list[FusedGroup]] = field(default_factory=list)
    """Per run, the runtime nodes fused from several layers, longest first (empty for torch)."""
    instructions: list[Row] | None = None
    """Per layer, instructions per iteration in every run (callgrind's simulated counts, or perf's),
    when every run has them: the noise-free comparison of two model versions."""
    instructions_source: list[str] = field(default_factory=list)
    stage_notes: list[str] = field(default_factory=list)
    """Per run whose NMS had (almost) no candidates: what its postprocess stage is worth."""
    memory: list[Row] | None = None
    """Per layer, bytes allocated per forward in every run (torch's CPU allocator: torch_memory, the layers pass),
    when every run has them (hwprof.analysis.layers.memory)."""
    layer_notes: list[str] = field(default_factory=list)
    """How the layers were matched where it is not plain: the layers not in every run (one line), matched by
    position, classes that differ, rows of inclusive times."""

    def to_dict(self) -> dict[str, Any]:
        out = asdict(replace(self, runs=[]))
        out["runs"] = [head.to_dict() for head in self.runs]
        return out


def _ratios(values: list[float | None]) -> list[float | None]:
    base = values[0]
    return [v / base if (v is not None and base) else None for v in values]


def _speedups(values: list[float | None]) -> list[float | None]:
    base = values[0]
    return [base / v if (base is not None and v) else None for v in values]


def layer_mismatch(analyses: Sequence[Analysis]) -> str | None:
    """Why the runs' layers are not compared at all; None when they are (matched by match_layers). A user's
    program's model has no name of hwprof's (its class): it is matched by its layer table alone, so that a
    program's yolov7 and `--model yolov7` compare layer by layer."""
    heads = [a.workload.compared_name for a in analyses if a.workload.compared_name is not None]
    if len(set(heads)) > 1:
        return (
            f"runs are of different models ({', '.join(str(h) for h in heads)}): layers are not compared "
            "layer by layer; stages and headline figures are"
        )
    if any(not a.layers.layers for a in analyses):
        return "a run has no layer table: layers are not compared"
    return None


def matched_layers(analyses: Sequence[Analysis]) -> LayerMatch:
    """The runs' layers matched as a user means them, or why none are."""
    refused = layer_mismatch(analyses)
    if refused is not None:
        return LayerMatch([], refused=refused)
    match = match_layers([a.layers.layers for a in analyses])
    if match.refused is not None:
        match.refused += ": layers are not compared"
    return match


def compare_analyses(analyses: Sequence[Analysis], paths: Sequence[Path]) -> Comparison:
    if len(analyses) < 2:
        raise ValueError("compare needs at least two run directories")
    heads = [head(a, p) for a, p in zip(analyses, paths, strict=True)]
    stages = _stage_rows(analyses)
    match = matched_layers(analyses)
    layers = _layer_rows(analyses, match) if match.refused is None else None
    notes = _notes(heads, layers is not None)
    fused = [list(a.runtime.fused) if a.runtime is not None else [] for a in analyses]
    instructions, sources = instruction_rows(analyses, match) if match.refused is None else (None, [])
    stage_notes = [
        f"run {chr(ord('A') + i) if i < 26 else i + 1}: {a.stages.postprocess_note}"
        for i, a in enumerate(analyses)
        if a.stages.postprocess_note
    ]
    _mark_unconfirmed(stages, heads, lambda h: "timing")
    _mark_unconfirmed(layers or [], heads, lambda h: h.time_pass)
    c = Comparison(heads, stages, layers, match.refused, notes, fused, instructions, sources, stage_notes)
    c.layer_notes = _match_notes(match, len(analyses))
    c.memory = memory_rows(analyses, match) if match.refused is None else None
    return c


def _mark_unconfirmed(rows: list[Row], heads: list[RunHead], source: Callable[[RunHead], str | None]) -> None:
    """Each row's ratio of run i to run A unconfirmed where the pass either measured it with was unfit."""
    whys = [h.unfit.get(source(h) or "", "") for h in heads]
    marks = [""] + ["; ".join(f"{letter(j)}: {whys[j]}" for j in (0, i) if whys[j]) for i in range(1, len(heads))]
    if any(marks):
        for row in rows:
            row.unconfirmed = marks


def _match_notes(match: LayerMatch, n: int) -> list[str]:
    notes = [match.unmatched] if match.unmatched else []
    if match.types_differ:
        runs = " / ".join(letter(i) for i in range(n))
        notes.append(
            f"{match.types_differ} matched layer{'s' if match.types_differ > 1 else ''} of another class per run "
            f"(shown {runs}): matched by name, compared all the same"
        )
    if any(m.inclusive for m in match.layers):
        notes.append("(incl.): the runs nest different layers in it, so its times include its nested layers'")
    return notes


def _stage_rows(analyses: Sequence[Analysis]) -> list[Row]:
    """Every stage any run has, in pipeline order."""
    stages = []
    for name in in_stage_order(row.name for a in analyses for row in a.stages.rows):
        values = [(r.p50_ms if (r := a.stages.get(name)) else None) for a in analyses]
        shares = [(r.share if (r := a.stages.get(name)) else None) for a in analyses]
        stages.append(Row(name, values, _ratios(values), shares, _speedups(values)))
    return stages


def _layer_rows(analyses: Sequence[Analysis], match: LayerMatch) -> list[Row]:
    """Layer by layer (as matched), with the kernel each ran."""
    layers = []
    for m in match.layers:
        values = [row_time(m, i) for i in range(len(analyses))]
        ran = [layer_kernel(a, r) for a, r in zip(analyses, m.stats, strict=True)]
        layers.append(
            Row(
                m.label,
                values,
                _ratios(values),
                [None if m.inclusive else r.share for r in m.stats],
                _speedups(values),
                [kernel for kernel, _ in ran],
                [groups for _, groups in ran],
            )
        )
    return layers


def _notes(heads: list[RunHead], layers_compared: bool) -> list[str]:
    """How the runs differ (settings, software, where the layer times come from), and each run's own caveats."""
    notes = []
    for attr, label in (
        ("imgsz", "image sizes"),
        ("batch", "batch sizes"),
        ("threads", "thread counts"),
        ("host_kind", "kinds of machine"),
    ):
        distinct = {getattr(h, attr) for h in heads}
        if len(distinct) > 1:
            notes.append(f"the runs differ in {label}: " + ", ".join(str(getattr(h, attr)) for h in heads))
    differ = differing_software(h.versions for h in heads if h.versions)
    if differ:
        notes.append(f"the runs differ in software ({', '.join(differ)}): see the software row")
    # a list in run order, not a set: the note must read the same in every process (str hashes vary)
    time_sources = [h.layer_times for h in heads]
    if layers_compared and len(set(time_sources)) > 1:
        letters = [chr(ord("A") + i) if i < 26 else str(i + 1) for i in range(len(heads))]
        notes.append(
            "layer times come from different passes: "
            + "; ".join(f"{n}: {src}" for n, src in zip(letters, time_sources, strict=True))
        )
    for n, h in enumerate(heads):
        letter = chr(ord("A") + n) if n < 26 else str(n + 1)
        if h.status != "complete":
            notes.append(f"run {letter} ({h.path}) is {h.status}: its figures cover only what it finished")
        notes += [f"run {letter}: {w}" for w in h.warnings]
        notes += [f"run {letter}: {why}: ratios marked ? rest on it, not measured facts" for why in h.unfit.values()]
    return notes


def instruction_rows(analyses: Sequence[Analysis], match: LayerMatch) -> tuple[list[Row] | None, list[str]]:
    """Per-layer instructions of every run, with B - A in `ratios`' place left to the renderer."""
    if not all(a.layers.has("instructions") for a in analyses):
        return None, []
    rows = []
    for m in match.layers:
        values = [row_instructions(m, i, a.layers.layers) for i, a in enumerate(analyses)]
        rows.append(Row(m.label, values, _ratios(values), [None] * len(values), [None] * len(values)))
    sources = [
        "callgrind (simulated) unless a PMU counted them" if a.doc.entry("callgrind").ran else "perf/PAPI"
        for a in analyses
    ]
    return rows, sources


def memory_rows(analyses: Sequence[Analysis], match: LayerMatch) -> list[Row] | None:
    """Per matched layer, its bytes allocated per forward in every run (a layer's range holds its nested layers'
    allocations, so an inclusive match needs no sum); None unless every run measured them."""
    if not all(any(r.alloc_bytes is not None for r in a.memory.layers) for a in analyses):
        return None
    rows = []
    for m in match.layers:
        values = [s.metrics.get(ALLOC) for s in m.stats]
        rows.append(Row(m.label, values, _ratios(values), [None] * len(values), [None] * len(values)))
    return rows


def compare_runs(run_dirs: Sequence[Path | str]) -> Comparison:
    """Load and analyse each run directory, then compare them (the first is the baseline)."""
    from hwprof.rundir.reader import RunData

    paths = [Path(p) for p in run_dirs]
    if len(paths) < 2:
        raise ValueError("compare needs at least two run directories")
    analyses = [analyse(RunData.load(p)) for p in paths]
    kinds = [host_kind(a.doc.host.to_json()) for a in analyses]
    order = sorted(range(len(paths)), key=lambda i: kinds.index(kinds[i]))
    c = compare_analyses([analyses[i] for i in order], [paths[i] for i in order])
    if order != sorted(order):
        c.notes.append("runs grouped by kind of machine (the first run's kind first); run A is still the first given")
    return c
