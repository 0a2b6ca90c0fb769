"""What a run directory gives an experiment tracker: its parameters, metrics, tags and artifacts, from its run.json
and its analysis (hwprof.analysis.run_analysis, read through its records: the metrics are summary.json's figures
under the names it gives them), and its files, as plain values: hwprof.tracking.mlflow_store sends them to MLflow.
summary.json and layers.csv, as `hwprof report` writes them, are made here, so that a run whose files were never
rendered gives them too.

Names are chosen so that MLflow's run comparison lines the same figure up across runs: `stage.forward.p50_ms`,
`pass.layers.cost`, `layer.model.7.time_ms`. Parameters are what was asked and where (model, weights and their
sha256, size, batch, threads, runtime, precision, device, the host and its CPU, torch's and hwprof's versions, the
passes); metrics what was measured; tags how the run ended and whether its timing pass was clean.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from hwprof.analysis.neighbours import timing_health
from hwprof.analysis.overhead import PassCost
from hwprof.analysis.run_analysis import Analysis, analyse
from hwprof.render.export import layers_csv_text, summary_dict
from hwprof.rundir.reader import RunData
from hwprof.schema.weights import WeightsDoc

ARTIFACTS = ("report.html", "advice.json", "advice.csv")
"""The run's files logged as artifacts where present, with its plots (*.png); the trace only when asked. summary.json
and layers.csv are logged as made from the analysis (RunFigures.texts)."""
TRACE = "trace.pftrace"
RUN_ID_TAG = "hwprof.run_id"
"""The tag by which a run logged before is found again (logging is idempotent)."""
PARAM_MAX = 500
"""MLflow's limit on a parameter's value (longer ones are cut, saying so)."""
STAGE_FIGURES = ("p50_ms", "p90_ms", "p99_ms", "mean_ms", "energy_j")
"""Each stage's figures logged (`stage.forward.p50_ms`), as summary.json names them."""
TAG_MAX = 5000
"""Where a tag's value is cut (within MLflow's limit on a tag's value)."""


@dataclass
class RunFigures:
    """One run directory as an experiment tracker takes it."""

    run_id: str
    name: str
    params: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    artifacts: list[Path] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)
    """Artifacts made here: file name -> its text."""


def run_figures(run_dir: Path, with_trace: bool = False) -> RunFigures:
    """The run's figures; RunDirError (a ValueError) where run.json cannot be read."""
    data = RunData.load(run_dir)
    doc = data.doc
    analysis = analyse(data)
    config = doc.config
    model = doc.model.name or config.model or "program"
    run_id = doc.run_id or run_dir.name
    figures = RunFigures(run_id=run_id, name=f"{model} {config.imgsz or ''} {run_id}".replace("  ", " "))
    figures.params = _params(data)
    figures.metrics = _metrics(analysis)
    health, disturbed = timing_health(doc)
    figures.tags = {
        RUN_ID_TAG: run_id,
        "hwprof.run_dir": str(run_dir.resolve()),
        "host": str(doc.host.hostname or ""),
        "status": data.shown_status,
        "health": health or "no timing pass",
    }
    if disturbed:
        figures.tags["disturbed"] = disturbed
    names = [*ARTIFACTS, *sorted(p.name for p in run_dir.glob("*.png"))] + ([TRACE] if with_trace else [])
    figures.artifacts = [run_dir / n for n in names if (run_dir / n).is_file()]
    figures.texts = {
        "summary.json": json.dumps(summary_dict(analysis), indent=1) + "\n",
        "layers.csv": layers_csv_text(analysis),
    }
    return figures


def _params(data: RunData) -> dict[str, str]:
    doc = data.doc
    config = doc.config
    weights = WeightsDoc.of_model(doc.model.weights)
    packages = doc.host.packages or {}
    raw: dict[str, object] = {  # each value as its text (_param); None and "" are left out
        "model": doc.model.name or config.model,
        "weights": weights.path if weights is not None else doc.model.weights,
        "weights_sha256": weights.sha256 if weights is not None else None,
        "imgsz": config.imgsz,
        "batch": config.batch,
        "threads": config.threads,
        "runtime": config.runtime,
        "precision": config.precision,
        "device": config.device,
        "iters": config.iters,
        "warmup": config.warmup,
        "host": doc.host.hostname,
        "cpu": doc.host.cpu_model,
        "logical_cpus": doc.host.logical_cpus,
        "torch": packages.get("torch"),
        "hwprof": packages.get("hwprof"),
        "passes": ",".join(doc.passes),
        "program": " ".join(config.program.argv or []) if config.program is not None else None,
    }
    return {k: _param(v) for k, v in raw.items() if v not in (None, "")}


def _param(value: object) -> str:
    """A parameter's value as MLflow takes it: its text, cut to PARAM_MAX saying so."""
    text = str(value)
    return text if len(text) <= PARAM_MAX else text[: PARAM_MAX - 12] + " ...(cut)"


def _metrics(a: Analysis) -> dict[str, float]:
    """The figures summary.json gives (the same names and values): the stages, the forward's rate against the
    roof, each pass's cost and wall time, and the model's top-level layers."""
    out: dict[str, float] = {}
    for row in a.stages.rows:
        values = (row.p50_ms, row.p90_ms, row.p99_ms, row.mean_ms, row.energy_j)
        for key, value in zip(STAGE_FIGURES, values, strict=True):
            _put(out, f"stage.{row.name}.{key}", value)
    _put(out, "fps", a.stages.fps)
    _put(out, "inference_fps", a.stages.inference_fps)
    if a.roofline is not None:
        _put(out, "forward.gflops_s", a.roofline.gflops_s)
        _put(out, "forward.pct_peak", a.roofline.pct_peak)
    for cost in a.overheads.passes:
        _put(out, f"pass.{cost.name}.cost", _cost_ratio(cost))
        _put(out, f"pass.{cost.name}.wall_s", cost.wall_s)
    for layer in a.layers.layers:
        if layer.depth == 1:
            _put(out, f"layer.{layer.name}.time_ms", layer.time_ms)
            _put(out, f"layer.{layer.name}.share", layer.share)
    return out


def _cost_ratio(cost: PassCost) -> float | None:
    """The pass's cost as summary.json gives it: its own cost's ratio (none where that is not resolved: its blocks'
    median is no figure), else the pass-level ratio."""
    if cost.cost is not None:
        return cost.cost.ratio if cost.cost.resolved else None
    return cost.pass_level.ratio if cost.pass_level is not None else None


def _put(out: dict[str, float], name: str, value: float | None) -> None:
    """`value` under `name`, where it is a finite number (summary.json has no NaN or infinity: they are null)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        out[name] = float(value)
