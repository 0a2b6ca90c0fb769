"""Pipeline stages: latency percentiles, share of the iteration, throughput and energy per stage."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from hwprof.analysis.availability import Missing, collector_missing
from hwprof.analysis.neighbours import timing_disturbance
from hwprof.schema.summaries_cpu import RAPL_ENERGY_METRIC, RaplSummary, SysstatSummary

if TYPE_CHECKING:
    from hwprof.rundir.reader import RunData

STAGE_ORDER = (
    "load",
    "decode",
    "preprocess",
    "h2d",
    "forward",
    "backward",
    "postprocess",
    "annotate",
    "encode",
    "draw",
    "write",
    "show",
)
"""The pipeline's stages in the order they run (hwprof.workload.pipeline): load for images or decode for a video,
h2d the host-to-device copy of a --device cuda run (workload/rt_cuda.py), annotate and encode with --annotate;
backward, draw, write, show: a program's (hwprof.program.known_stages)."""
LAST_STAGES = ("other", "iteration")
"""After every stage: a program's time no stage claims, and the whole iteration."""
FEW_CANDIDATES = 10
"""Below this many candidate boxes per iteration, NMS does almost none of a trained model's work."""


def in_stage_order(names: Iterable[str]) -> list[str]:
    """Pipeline order: hwprof's stages, then a program's own (by name), then other and the iteration."""
    given = set(names)
    own = sorted(n for n in given if n not in STAGE_ORDER and n not in LAST_STAGES)
    return [n for n in STAGE_ORDER if n in given] + own + [n for n in LAST_STAGES if n in given]


@dataclass
class StageRow:
    name: str
    n: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    mean_ms: float
    stdev_ms: float
    share: float | None
    """p50 of the stage / p50 of the whole iteration (shares need not add to 1: medians)."""
    fps: float
    """Images per second if only this stage ran: batch / p50."""
    energy_j: float | None = None
    """RAPL energy per iteration of the stage (whole socket), layers pass."""
    energy_j_per_image: float | None = None
    rss_peak_bytes: float | None = None
    """sysstat: peak resident memory during the stage (layers pass; VmHWM reset at the stage's begin)."""
    cores_busy: float | None = None
    """sysstat: process CPU time / wall time of the stage (layers pass)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Stages:
    rows: list[StageRow]
    source: str
    batch: int
    fps: float | None
    """End to end: batch / iteration p50."""
    energy_missing: Missing | None
    j_per_image: float | None = None
    avg_w: float | None = None
    peak_rss_bytes: float | None = None
    """sysstat: peak resident memory of the layers pass's process."""
    process_missing: Missing | None = None
    disturbed: str | None = None
    """Why the pass the stages come from (the timing pass) is not clean (analysis.neighbours), or None."""
    nms_candidates: int | None = None
    """Median boxes over the confidence threshold that NMS considered per iteration (None: not recorded)."""
    conf: float | None = None
    random_init: bool = False
    """The model had seeded random weights: NMS's work follows boxes that mean nothing."""

    @property
    def postprocess_note(self) -> str | None:
        """What the postprocess stage's time is worth when NMS had (almost) nothing to do, or None."""
        n = self.nms_candidates
        if n is None or (n >= FEW_CANDIDATES and not self.random_init):
            return None
        weights = " of random weights" if self.random_init else ""
        return (
            f"postprocess: NMS considered {n:,} candidate boxes per iteration{weights} (median, score over conf "
            f"{self.conf}): a trained model gives it tens to hundreds, so this stage's time is not the one a real "
            "model has" + (" (collect with --weights for it)" if self.random_init else "")
        )

    def get(self, name: str) -> StageRow | None:
        return next((r for r in self.rows if r.name == name), None)

    @property
    def inference_fps(self) -> float | None:
        """Images per second of the forward stage alone (batch / forward p50): seed 004's "inference speed"."""
        row = self.get("forward")
        return row.fps if row is not None and row.p50_ms > 0 else None

    @property
    def iteration_stages(self) -> list[str]:
        """The stages an iteration ran, in order: what the end-to-end figure includes."""
        return [r.name for r in self.rows if r.name != "iteration"]

    @property
    def writes_frames(self) -> bool:
        """Whether an iteration wrote its annotated frames (--annotate): the encode stage ran."""
        return self.get("encode") is not None


def stage_table(data: RunData) -> Stages:
    run = data.doc
    stages = run.stages
    batch = int(run.batch or 1)
    whole = stages["iteration"].p50_ms if "iteration" in stages else None
    metrics = data.metrics()
    energy = metrics.get("rapl")
    sysstat = metrics.get("sysstat")
    rows = []
    for name in in_stage_order(stages):
        s = stages[name]
        row = StageRow(
            name,
            int(s.n),
            float(s.p50_ms),
            float(s.p90_ms),
            float(s.p99_ms),
            float(s.mean_ms),
            float(s.stdev_ms),
            s.p50_ms / whole if whole and name != "iteration" else (1.0 if name == "iteration" else None),
            batch * 1e3 / s.p50_ms if s.p50_ms > 0 else 0.0,
        )
        if energy is not None and RAPL_ENERGY_METRIC in energy.stages.get(name, {}):
            row.energy_j = float(energy.stages[name][RAPL_ENERGY_METRIC])
            row.energy_j_per_image = row.energy_j / batch
        if sysstat is not None:
            proc = sysstat.stages.get(name, {})
            row.rss_peak_bytes = proc.get("rss_peak_bytes")
            row.cores_busy = proc.get("cores_busy")
        rows.append(row)
    missing = None
    j_per_image = avg_w = None
    per_inf = run.summary(RaplSummary).per_inference if run.entry("rapl").ran else None
    if per_inf is not None and per_inf.J_per_inference is not None:
        j_per_image = float(per_inf.J_per_inference)
        avg_w = per_inf.avg_W
    if not any(r.energy_j is not None for r in rows) and j_per_image is None:
        missing = collector_missing(run, ["rapl"], "stage energy")
    out = Stages(rows, str(run.stages_source or ""), batch, run.fps, missing, j_per_image, avg_w)
    peak = run.summary(SysstatSummary).peak_rss_bytes
    out.peak_rss_bytes = float(peak) if peak is not None else None
    if out.source == "timing":
        out.disturbed = timing_disturbance(run)
    out.nms_candidates, out.conf = nms_candidates(data), run.config.conf
    out.random_init = bool(run.model.random_init)
    if peak is None and not any(r.rss_peak_bytes is not None for r in rows):
        out.process_missing = collector_missing(run, ["sysstat"], "memory or CPU figures")
    return out


def nms_candidates(data: RunData) -> int | None:
    """The median candidates NMS considered per iteration (counted in the warm-up ones), from the first pass that
    recorded them."""
    import statistics

    for name in data.pass_names:
        counts = data.pass_result(name).candidates_per_iteration
        if counts:
            return int(statistics.median(counts))
    return None
