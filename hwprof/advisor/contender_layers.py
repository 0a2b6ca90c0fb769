"""The layers collects of advise's contenders: a real `hwprof collect` (a timing and a layers pass with the FLOP
counter, no counter collector) of the baseline, once, and of each contender's variant, made the same way; a row gets
the layers that moved most between the two."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from hwprof.advisor.children import layers_command, run_child
from hwprof.analysis.advice.candidate import Candidate
from hwprof.analysis.advice.table import AdviceRow, top_layer_deltas
from hwprof.core.config import RunConfig
from hwprof.rundir.reader import RunData
from hwprof.session.stopping import StopSignals
from hwprof.session.worker_io import ProgressEvent

LAYERS_ITERS = 10
CONTENDERS = 3
"""The rows whose variant gets a layers collect: the fastest measured ones (analysis.advice.table.contenders)."""
NOT_CONTENDER = (
    f"no per-layer times: not among the {CONTENDERS} fastest rows measured with their output checked (advise "
    "collects the layers of its contenders only)"
)
LayerTimes = dict[int, tuple[str, float]]
"""A collect's top-level layers: index -> (type, time ms)."""


class LayersCollects:
    """The baseline's layers collect (made at the first contender, kept) and each contender's, in the advise
    folder; `baseline` / `baseline_error`: its layer times, or why it has none."""

    def __init__(
        self, folder: Path, config: RunConfig, stop: StopSignals, progress: Callable[[str, ProgressEvent], None]
    ) -> None:
        self.folder, self.config, self.stop, self.progress = folder, config, stop, progress
        self.baseline: LayerTimes | None = None
        self.baseline_error = ""

    def fill(self, row: AdviceRow, c: Candidate, variant: RunConfig) -> None:
        """The row's layers that moved most (c.layers of them), or its note saying which collect failed."""
        if self.baseline is None and not self.baseline_error:
            self.baseline, self.baseline_error = self._collect(self.config, "baseline-layers")
        if self.baseline is None:
            row.layers_note = f"no per-layer times: the baseline's layers collect failed ({self.baseline_error})"
            return
        after, error = self._collect(variant, f"{c.key}/layers", c.env)
        if after is None:
            row.layers_note = f"no per-layer times: the variant's layers collect failed ({error})"
            return
        scale = variant.batch / self.config.batch if c.per_image else 1.0
        after_ms = {i: ms / scale for i, (_, ms) in after.items()}
        row.layers = top_layer_deltas(self.baseline, after_ms, keep=c.layers)
        row.variant_run = f"{self.folder.name}/{c.key}/layers"

    def _collect(
        self, config: RunConfig, name: str, env: dict[str, str] | None = None
    ) -> tuple[LayerTimes | None, str]:
        """A layers collect of `config`; `env`: the variant's environment (an allocator, OMP_WAIT_POLICY), which
        its passes' workers inherit, so that its layer times are the variant's."""
        from hwprof.analysis.run_analysis import analyse

        out = self.folder / name
        if out.exists():
            shutil.rmtree(out)
        iters = min(self.config.iters, LAYERS_ITERS)
        command = layers_command(config, out, iters, max(1, config.warmup))
        outcome = run_child(
            command,
            self.folder / f"{name.replace('/', '-')}.log",
            2 * config.pass_timeout_s,
            self.stop,
            lambda e: self.progress(name, e),
            env,
        )
        if not outcome.ok:
            return None, outcome.error
        try:
            report = analyse(RunData.load(out)).layers
        except (OSError, ValueError) as exc:
            return None, f"{type(exc).__name__}: {exc}"
        times = {r.index: (r.type, r.time_ms) for r in report.top_level if r.time_ms is not None}
        return (times, "") if times else (None, "the layers pass recorded no layer times")
