"""`hwprof compare BASE NEW --fail-above 5% --paired N`: BASE's and NEW's configurations (their run.json's)
measured again in one child process, in N ABBA blocks, by `hwprof advise`'s paired worker; then judged on the
blocks' ratios (hwprof.analysis.gate_paired)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from hwprof.analysis.gate import GateError, GateOptions, GateRun, Verdict, differences, refuse_differences
from hwprof.analysis.gate_paired import judge_paired
from hwprof.core.config import RunConfig
from hwprof.session.stopping import StopSignals

PAIRED_TIMEOUT_S = 3600.0


def run_config(run_dir: Path, side: str) -> RunConfig:
    """The configuration a run was collected with; GateError for a run that cannot be measured again here."""
    from hwprof.rundir.reader import RunData

    data = RunData.load(run_dir)
    if not data.doc.config:
        raise GateError(f"{side} ({run_dir}) holds no configuration to measure again (--paired)")
    config = RunConfig.from_dict(data.doc.config.to_json())
    if config.program is not None:
        raise GateError(f"{side} ({run_dir}) is a user's program: --paired measures hwprof's own pipeline only")
    return config


def measure_paired(run_dirs: list[Path], blocks: int, opts: GateOptions, stop: StopSignals) -> tuple[Verdict, float]:
    """Both configurations in ABBA blocks in one process; the verdict and the measure's wall time (s)."""
    from hwprof.advisor.children import paired_command, run_child
    from hwprof.rundir.advise_files import read_advise_result
    from hwprof.schema.advise_result import AdviseSpec

    if len(run_dirs) != 2:
        raise GateError(f"--paired gates two runs, BASE and NEW (got {len(run_dirs)})")
    base, new = run_config(run_dirs[0], "BASE"), run_config(run_dirs[1], "NEW")
    differ = differences(*(GateRun(str(p), identity=identity(c)) for p, c in zip(run_dirs, (base, new), strict=True)))
    refuse_differences(differ, opts)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hwprof-gate-") as tmp:
        work = Path(tmp)
        spec = AdviseSpec.of(
            key="gate",
            baseline=base.to_dict(),
            variant=new.to_dict(),
            blocks=blocks,
            warmup=max(1, base.warmup, new.warmup),
            work_dir=str(work / "work"),
            mode="paired",
            out=str(work / "paired.json"),
        )
        outcome = run_child(
            paired_command(spec, work / "spec.json"), work / "worker.log", PAIRED_TIMEOUT_S, stop, lambda e: None
        )
        result = read_advise_result(work / "paired.json")
        if not outcome.ok or result.error is not None or len(result.sides) != 2:
            raise GateError(f"the paired measure failed: {result.error or outcome.error or 'no figures'}")
    sides = {
        name: tuple({int(k): v for k, v in getattr(result.sides[s], attr).items()} for s in ("baseline", "variant"))
        for name, attr in (("forward", "forward_ms"), ("iteration", "iteration_ms"))
    }
    verdict = judge_paired(str(run_dirs[0]), str(run_dirs[1]), sides, opts)  # type: ignore[arg-type]
    if differ:
        verdict.line += "; the runs differ in " + "; ".join(differ)
    return verdict, time.monotonic() - started


def identity(config: RunConfig) -> dict[str, str]:
    """What must match for a like-for-like gate, as hwprof.analysis.gate_input has it for a run."""
    keys = ("model", "imgsz", "batch", "runtime", "precision", "threads")
    return {key: str(getattr(config, key)) for key in keys}
