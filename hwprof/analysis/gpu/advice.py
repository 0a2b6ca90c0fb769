"""The GPU advice table from the recorded H100 experiments (gpu_experiments.json, gpu_compile.json).

No GPU here: the GPU candidates (gpu_candidates.gpu_candidates, each tied to a finding of the run) get
the figures the recordings hold for the run's configuration (model, batch, precision, memory format), as
what hwprof would print had it run them. Pure: the JSON documents come in as lists of dicts.

What each figure is against (said in the row, never blended across experiments):
- cuda-graph: gpu_experiments.json, the same point's eager_ms against its cuda_graph_ms;
- fp16, channels_last, batch-N: gpu_experiments.json, the run's point's eager_ms against the other
  point's eager_ms (batch: per image, eager_ms / batch);
- compile-reduce-overhead: gpu_compile.json's row of the same model and batch, whose eager baseline and
  compiled model are both fp16 channels_last (gpu_compile_exp.py builds only that): the row says so when
  the run's configuration differs. compile_s (first call: compile and capture) is the setup time, so the
  row's breakeven is computed.
No recording has a spread (each figure is one median) or detections: ratios are bare, output checks absent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hwprof.analysis.advice.candidate import Candidate, RunFacts
from hwprof.analysis.advice.candidates import candidates
from hwprof.analysis.advice.speedup import RECORDED, Speedup
from hwprof.analysis.advice.table import (
    FAILED,
    NOT_RUN,
    Advice,
    AdviceRow,
)
from hwprof.analysis.finding import Finding

RECORDINGS = "shared/recordings/h100-2026-11-22"
SOURCE = f"recorded on an NVIDIA H100 ({RECORDINGS}), not run here"
DEVICE = "NVIDIA H100 80GB HBM3 (recorded)"
NOT_RECORDED = "not in the recordings"
TIMING_NOTE = (
    "recorded figures: each time is the median of 100 timed, CUDA-synchronised forwards of one configuration "
    "(gpu_experiments.py, gpu_compile_exp.py), the configurations timed one after another, not paired "
    "(no ABBA blocks), so no spread was recorded"
)
VARIANCE_NOTE = (
    "the recordings' README: eager latency at batch 1 moved by 50% from one run to the next (CPU-bound "
    "launching), so a recorded batch-1 ratio against eager is uncertain by about that much"
)
OUTPUT_NOTE = (
    "output check: the recordings hold no detections (no head range, no boxes before or after NMS), so no row "
    "has an output check; gpu_compile.json's max_abs_diff (compiled against eager, both fp16 channels_last, "
    "the head's first output) is quoted in the compile row"
)
COMPILE_PRECISION, COMPILE_CHANNELS_LAST = "fp16", True
"""The only configuration gpu_compile_exp.py builds (model.half(), channels_last)."""


@dataclass(frozen=True)
class GpuBaseline:
    """The advised run's configuration, the point of the recordings its figures are read at."""

    model: str
    batch: int
    precision: str
    channels_last: bool

    def label(self, batch: int | None = None, precision: str | None = None, channels_last: bool | None = None) -> str:
        cl = self.channels_last if channels_last is None else channels_last
        return (
            f"{self.model} batch {self.batch if batch is None else batch} {precision or self.precision} "
            f"{'channels_last' if cl else 'NCHW'}"
        )

    def options(self) -> str:
        return f"--model {self.model} --device cuda --batch {self.batch} --precision {self.precision}" + (
            " --channels-last" if self.channels_last else ""
        )

    def facts(self) -> RunFacts:
        return RunFacts("torch", self.precision, "cuda", self.channels_last, 1, self.batch, None)


def experiment(
    rows: Sequence[Mapping[str, Any]], model: str, batch: int, precision: str, channels_last: bool
) -> Mapping[str, Any] | None:
    """The gpu_experiments.json point of this configuration, or None."""
    return next(
        (
            r
            for r in rows
            if r.get("model") == model
            and r.get("batch") == batch
            and r.get("precision") == precision
            and bool(r.get("channels_last")) == channels_last
        ),
        None,
    )


def compile_row(rows: Sequence[Mapping[str, Any]], model: str, batch: int, mode: str) -> Mapping[str, Any] | None:
    return next(
        (r for r in rows if r.get("model") == model and r.get("batch") == batch and r.get("mode") == mode), None
    )


def _ms(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _row(c: Candidate, **kw: Any) -> AdviceRow:
    return AdviceRow(c.key, c.change, c.how, c.finding, **kw)


def _speedup(before: float, after: float) -> Speedup:
    return Speedup(RECORDED, before / after, before_ms=before, after_ms=after)


def _eager_pair(c: Candidate, base: GpuBaseline, here: Mapping[str, Any], there: Mapping[str, Any] | None) -> AdviceRow:
    """An eager-to-eager change (precision, memory format, batch) between two gpu_experiments.json points."""
    batch = base.batch if c.variant.batch is None else c.variant.batch
    label = base.label(batch, c.variant.precision, c.variant.channels_last)
    if there is None or _ms(there.get("eager_ms")) is None:
        return _row(c, status=NOT_RUN, reason=f"{NOT_RECORDED}: gpu_experiments.json has no eager time for {label}")
    before, after = float(here["eager_ms"]) / base.batch, float(there["eager_ms"]) / batch
    per = " per image (eager_ms / batch)" if c.per_image else ""
    return _row(
        c,
        forward=_speedup(before, after),
        per_image=c.per_image,
        reason=f"gpu_experiments.json: eager {label} against eager {base.label()}{per}; output not recorded",
    )


def _cuda_graph(c: Candidate, base: GpuBaseline, here: Mapping[str, Any]) -> AdviceRow:
    graph = _ms(here.get("cuda_graph_ms"))
    if graph is None:
        return _row(c, status=FAILED, reason=f"the recorded capture failed: {here.get('cuda_graph_ms')}")
    return _row(
        c,
        forward=_speedup(float(here["eager_ms"]), graph),
        reason=f"gpu_experiments.json: CUDA graph replay against eager, both {base.label()}; output not recorded",
    )


def _compile(c: Candidate, base: GpuBaseline, rows: Sequence[Mapping[str, Any]]) -> AdviceRow:
    r = compile_row(rows, base.model, base.batch, c.compile_mode)
    if r is None or r.get("skipped"):
        why = f" (skipped: {r['skipped']})" if r else ""
        return _row(
            c,
            status=NOT_RUN,
            reason=f"{NOT_RECORDED}: gpu_compile.json has no mode '{c.compile_mode}' row for {base.model} "
            f"batch {base.batch}{why}",
        )
    if r.get("error"):
        return _row(c, status=FAILED, reason=f"recorded: {r['error']}")
    recorded = base.label(precision=COMPILE_PRECISION, channels_last=COMPILE_CHANNELS_LAST)
    against = f"gpu_compile.json: compiled against eager, both {recorded}, in the compile experiment's process"
    if (base.precision, base.channels_last) != (COMPILE_PRECISION, COMPILE_CHANNELS_LAST):
        against += (
            f"; NOT against this run's {base.label()}: from it the change is also --precision "
            f"{COMPILE_PRECISION}{' --channels-last' if COMPILE_CHANNELS_LAST and not base.channels_last else ''}"
        )
    diff = r.get("max_abs_diff")
    output = (
        f"; output: raw head max |d| {diff:g} against eager (head range and detections not recorded)"
        if _ms(diff) is not None
        else "; output not recorded"
    )
    return _row(
        c,
        forward=_speedup(float(r["eager_ms"]), float(r["compiled_ms"])),
        setup_s=_ms(r.get("compile_s")),
        setup_what="torch.compile's first call (compile and CUDA-graph capture), recorded",
        reason=against + output,
        layers_note="Inductor fuses across layers and the graph replays as one: no per-layer times",
    )


def recorded_row(
    c: Candidate, base: GpuBaseline, experiments: Sequence[Mapping[str, Any]], compiled: Sequence[Mapping[str, Any]]
) -> AdviceRow:
    """One candidate's row from the recordings (not run: its reason; else the recorded figures)."""
    if c.blocked:
        return _row(c, status=NOT_RUN, reason=c.blocked)
    if c.compile_mode:
        return _compile(c, base, compiled)
    if c.variant.precision == "bf16":
        return _row(c, status=NOT_RUN, reason=f"{NOT_RECORDED}: no bf16 configuration was recorded")
    here = experiment(experiments, base.model, base.batch, base.precision, base.channels_last)
    if here is None or _ms(here.get("eager_ms")) is None:
        return _row(c, status=NOT_RUN, reason=f"{NOT_RECORDED}: gpu_experiments.json has no point {base.label()}")
    if c.cuda_graph:
        return _cuda_graph(c, base, here)
    v = c.variant
    there = experiment(
        experiments,
        base.model,
        base.batch if v.batch is None else v.batch,
        base.precision if v.precision is None else v.precision,
        base.channels_last if v.channels_last is None else v.channels_last,
    )
    return _eager_pair(c, base, here, there)


def gpu_advice(
    base: GpuBaseline,
    findings: Iterable[Finding],
    experiments: Sequence[Mapping[str, Any]],
    compiled: Sequence[Mapping[str, Any]],
) -> Advice:
    """The advice table the recordings give for `base`: one row per GPU candidate, tied to the findings."""
    rows = [recorded_row(c, base, experiments, compiled) for c in candidates(base.facts(), findings)]
    return Advice(base.options(), DEVICE, rows, source=SOURCE, notes=[TIMING_NOTE, VARIANCE_NOTE, OUTPUT_NOTE])
