"""What a run directory gives an experiment tracker: its parameters, metrics, tags and artifacts, from the run's
analysis (its summary.json and layers.csv as `hwprof report` writes them, made here so that a run whose files were
never rendered gives them too) and its files, as plain values: hwprof.tracking.mlflow_store sends them to MLflow.

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
from typing import Any

from hwprof.analysis.neighbours import timing_health
from hwprof.analysis.run_analysis import analyse
from hwprof.render.export import layers_csv_text, summary_dict
from hwprof.rundir.reader import RunData

ARTIFACTS = ("report.html", "advice.json", "advice.csv")
"""The run's files logged as artifacts where present, with its plots (*.png); the trace only when asked. summary.json
and layers.csv are logged as made from the analysis (RunFigures.texts)."""
TRACE = "trace.pftrace"
RUN_ID_TAG = "hwprof.run_id"
"""The tag by which a run logged before is found again (logging is idempotent)."""
PARAM_MAX = 500
"""MLflow's limit on a parameter's value (longer ones are cut, saying so)."""


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
    summary = summary_dict(analysis)
    config = doc.config
    model = doc.model.name or config.model or "program"
    run_id = doc.run_id or run_dir.name
    figures = RunFigures(run_id=run_id, name=f"{model} {config.imgsz or ''} {run_id}".replace("  ", " "))
    figures.params = _params(data)
    figures.metrics = _metrics(summary)
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
    figures.texts = {"summary.json": json.dumps(summary, indent=1) + "\n", "layers.csv": layers_csv_text(analysis)}
    return figures


def _params(data: RunData) -> dict[str, str]:
    doc = data.doc
    config = doc.config
    weights = doc.model.weights
    packages = doc.host.packages or {}
    raw: dict[str, Any] = {
        "model": doc.model.name or config.model,
        "weights": weights.get("path") if isinstance(weights, dict) else weights,
        "weights_sha256": weights.get("sha256") if isinstance(weights, dict) else None,
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


def _param(value: Any) -> str:
    text = str(value)
    return text if len(text) <= PARAM_MAX else text[: PARAM_MAX - 12] + " ...(cut)"


def _metrics(summary: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    stages = summary.get("stages") or {}
    for row in stages.get("rows") or []:
        for key in ("p50_ms", "p90_ms", "p99_ms", "mean_ms", "energy_j"):
            _put(out, f"stage.{row.get('name')}.{key}", row.get(key))
    _put(out, "fps", stages.get("fps"))
    _put(out, "inference_fps", stages.get("inference_fps"))
    roofline = summary.get("roofline") or {}
    _put(out, "forward.gflops_s", roofline.get("gflops_s"))
    _put(out, "forward.pct_peak", roofline.get("pct_peak"))
    for row in (summary.get("overheads") or {}).get("passes") or []:
        cost = row.get("cost") or row.get("pass_level") or {}
        _put(out, f"pass.{row.get('name')}.cost", cost.get("ratio") if isinstance(cost, dict) else None)
        _put(out, f"pass.{row.get('name')}.wall_s", row.get("wall_s"))
    for row in (summary.get("layers") or {}).get("rows") or []:
        if row.get("depth") == 1:
            _put(out, f"layer.{row.get('name')}.time_ms", row.get("time_ms"))
            _put(out, f"layer.{row.get('name')}.share", row.get("share"))
    return out


def _put(out: dict[str, float], name: str, value: Any) -> None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        out[name] = float(value)
