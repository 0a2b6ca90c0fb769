"""Runs side by side: headline figures, stages and layers with ratios to the first run.

Layers are matched by index and type, and only between runs of the same model with the same
layer table: runs of different models (or of one model whose layer tables differ) are refused
layer by layer, with the reason, while their stages and headline figures are still compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hwprof.analysis.run_analysis import Analysis, analyse
from hwprof.analysis.stages import STAGE_ORDER


@dataclass
class RunHead:
    run_id: str
    path: str
    model: str | None
    imgsz: int | None
    batch: int | None
    threads: int | None
    cpu_model: str | None
    forward_ms: float | None
    iteration_ms: float | None
    fps: float | None
    gflops: float | None
    params_fused: int | None
    pct_peak: float | None
    intensity: float | None
    bound: str | None
    j_per_image: float | None


@dataclass
class Row:
    key: str
    """Stage name, or the layer's "index type"."""
    values: list[float | None]
    ratios: list[float | None]
    """values[i] / values[0]; None where either is missing or the first is 0."""
    shares: list[float | None] = field(default_factory=list)


@dataclass
class Comparison:
    runs: list[RunHead]
    stages: list[Row]
    layers: list[Row] | None
    layers_refused: str | None
    notes: list[str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ratios(values: list[float | None]) -> list[float | None]:
    base = values[0]
    return [v / base if (v is not None and base) else None for v in values]


def head(a: Analysis, path: Path) -> RunHead:
    run = a.run
    model = run.get("model", {})
    cfg = run.get("config", {})
    fwd = a.stages.get("forward")
    whole = a.stages.get("iteration")
    roof = a.roofline
    return RunHead(
        run_id=str(run.get("run_id", path.name)),
        path=str(path),
        model=model.get("name") or cfg.get("model"),
        imgsz=cfg.get("imgsz"),
        batch=cfg.get("batch"),
        threads=cfg.get("threads"),
        cpu_model=run.get("host", {}).get("cpu_model"),
        forward_ms=fwd.p50_ms if fwd else None,
        iteration_ms=whole.p50_ms if whole else None,
        fps=run.get("fps"),
        gflops=model.get("gflops"),
        params_fused=model.get("params_fused"),
        pct_peak=roof.pct_peak if roof else None,
        intensity=roof.intensity if roof else None,
        bound=roof.bound if roof else None,
        j_per_image=a.stages.j_per_image,
    )


def layer_mismatch(analyses: Sequence[Analysis]) -> str | None:
    """Why the runs' layers cannot be matched by index and type; None when they can."""
    heads = [(a.run.get("model", {}).get("name") or a.run.get("config", {}).get("model")) for a in analyses]
    if len(set(heads)) > 1:
        return (
            f"runs are of different models ({', '.join(str(h) for h in heads)}): layers are not compared "
            "layer by layer; stages and headline figures are"
        )
    tables = [[(r.index, r.type, r.name) for r in a.layers.layers] for a in analyses]
    if any(not t for t in tables):
        return "a run has no layer table: layers are not compared"
    for i, table in enumerate(tables[1:], 1):
        if len(table) != len(tables[0]):
            return (
                f"run {i + 1} has {len(table)} layers and run 1 has {len(tables[0])} (different --depth?): "
                "layers are not compared"
            )
        for mine, theirs in zip(tables[0], table, strict=True):
            if mine != theirs:
                return f"layer {mine[2]} is {mine[1]} in run 1 but {theirs[1]} in run {i + 1}: layers are not compared"
    return None


def compare_analyses(analyses: Sequence[Analysis], paths: Sequence[Path]) -> Comparison:
    if len(analyses) < 2:
        raise ValueError("compare needs at least two run directories")
    heads = [head(a, p) for a, p in zip(analyses, paths, strict=True)]
    names: list[str] = []
    for a in analyses:
        for row in a.stages.rows:
            if row.name not in names:
                names.append(row.name)
    names.sort(key=lambda n: STAGE_ORDER.index(n) if n in STAGE_ORDER else len(STAGE_ORDER))
    stages = []
    for name in names:
        values = [(r.p50_ms if (r := a.stages.get(name)) else None) for a in analyses]
        shares = [(r.share if (r := a.stages.get(name)) else None) for a in analyses]
        stages.append(Row(name, values, _ratios(values), shares))
    refused = layer_mismatch(analyses)
    layers: list[Row] | None = None
    if refused is None:
        layers = []
        for i, first in enumerate(analyses[0].layers.layers):
            rows = [a.layers.layers[i] for a in analyses]
            values = [r.time_ms for r in rows]
            layers.append(
                Row(
                    f"{first.index} {first.type}" if first.depth == 1 else f"{first.name} {first.type}",
                    values,
                    _ratios(values),
                    [r.share for r in rows],
                )
            )
    notes = []
    for attr, label in (
        ("imgsz", "image sizes"),
        ("batch", "batch sizes"),
        ("threads", "thread counts"),
        ("cpu_model", "CPUs"),
    ):
        distinct = {getattr(h, attr) for h in heads}
        if len(distinct) > 1:
            notes.append(f"the runs differ in {label}: " + ", ".join(str(getattr(h, attr)) for h in heads))
    time_passes = {a.layers.time_pass for a in analyses}
    if layers is not None and len(time_passes) > 1:
        notes.append("layer times come from different passes: " + ", ".join(str(p) for p in time_passes))
    return Comparison(heads, stages, layers, refused, notes)


def compare_runs(run_dirs: Sequence[Path | str]) -> Comparison:
    """Load and analyse each run directory, then compare them (the first is the baseline)."""
    from hwprof.rundata import RunData

    paths = [Path(p) for p in run_dirs]
    if len(paths) < 2:
        raise ValueError("compare needs at least two run directories")
    analyses = [analyse(RunData.load(p)) for p in paths]
    return compare_analyses(analyses, paths)
