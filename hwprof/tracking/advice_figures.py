"""What a run's advice.json gives an experiment tracker: each candidate as one of the baseline's child runs, with
its change as parameters, what it measured as metrics and how it ended as tags (read through the schema's
AdviceFile: the file's values as `hwprof advise` wrote them, its computed ones such as `resolved` included)."""

from __future__ import annotations

from pathlib import Path

from hwprof.rundir.reader import advice_path, read_json_if_present
from hwprof.schema.advice_file import AdviceFile, AdviceRowDoc
from hwprof.tracking.mlflow_store import TrackingError
from hwprof.tracking.run_figures import PARAM_MAX, RUN_ID_TAG, TAG_MAX, RunFigures

SPEEDUP_FIGURES = ("ratio", "q1", "q3", "before_ms", "after_ms")
"""Each speed-up's figures logged (`forward.ratio`), as advice.json names them."""


def advice_figures(run_dir: Path) -> list[RunFigures]:
    """advice.json's rows as the baseline's child runs: each candidate's change and what it measured; [] where the
    run has none, TrackingError where it cannot be read (the run itself can be logged without it)."""
    path = advice_path(run_dir)
    if not path.is_file():
        return []
    try:
        advice = AdviceFile.read(read_json_if_present(path), str(path))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise TrackingError(f"{path}: not readable ({exc}); the run itself can be logged without it") from None
    base = f"{run_dir.resolve().name}/advise/{advice.started_ns or 0}"
    return [_advice_row(base, row) for row in advice.rows]


def _advice_row(base: str, row: AdviceRowDoc) -> RunFigures:
    figures = RunFigures(run_id=f"{base}/{row.key}", name=f"advise {row.key}")
    texts = {"key": row.key, "change": row.change, "how": row.how, "finding": row.finding}
    figures.params = {k: v[:PARAM_MAX] for k, v in texts.items() if v}
    figures.metrics = _metrics(row)
    figures.tags = {
        RUN_ID_TAG: figures.run_id,
        "status": row.status or "",
        "resolved": str(bool(row.resolved)).lower(),
        "ranked": str(bool(row.ranked)).lower(),
    }
    if row.reason:
        figures.tags["reason"] = row.reason[:TAG_MAX]
    return figures


def _metrics(row: AdviceRowDoc) -> dict[str, float]:
    """The row's speed-ups (`forward.ratio`, ...) and its [baseline, variant] figures (`rss_bytes.variant`, ...)."""
    out: dict[str, float] = {}
    for part, speedup in (("forward", row.forward), ("end_to_end", row.end_to_end)):
        if speedup is None:
            continue
        values = (speedup.ratio, speedup.q1, speedup.q3, speedup.before_ms, speedup.after_ms)
        for name, value in zip(SPEEDUP_FIGURES, values, strict=True):
            if value is not None:
                out[f"{part}.{name}"] = float(value)
    for name, pair in (("minor_faults", row.minor_faults), ("rss_bytes", row.rss_bytes)):
        if pair is not None and len(pair) == 2:
            out[f"{name}.baseline"], out[f"{name}.variant"] = float(pair[0]), float(pair[1])
    return out
