"""`hwprof compare BASE NEW --fail-above 5% --paired N`: BASE's and NEW's configurations (their run.json's)
measured again in one child process, in N ABBA blocks, by `hwprof advise`'s paired worker; then judged on the
blocks' ratios (hwprof.analysis.gate.paired). Two runs of users' programs (`hwprof collect -- python old.py`,
`-- python new.py`) cannot share a process: each block runs the programs whole in ABBA order, each run a fresh
process timing its calls of its model (`hwprof advise`'s program worker, mode "timed")."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from hwprof.analysis.gate.judge import GateRun, differences, refuse_differences
from hwprof.analysis.gate.paired import BY_PROCESS, judge_paired
from hwprof.analysis.gate.verdict import GateError, GateOptions, Verdict
from hwprof.core.config import RunConfig
from hwprof.schema.advise_result import SideFigures
from hwprof.session.stopping import StopSignals

PAIRED_TIMEOUT_S = 3600.0
PROGRAM_CALLS = 6
"""Measured calls of its model per run of a program (after its warm-up): the run's figure is their median."""
PROGRAM_WARMUP = 2
"""At least this many warm-up calls per run: a fresh process's first calls at a shape build oneDNN's primitives."""


def run_config(run_dir: Path, side: str) -> RunConfig:
    """The configuration a run was collected with; GateError for a run that cannot be measured again here."""
    from hwprof.rundir.reader import RunData

    data = RunData.load(run_dir)
    if not data.doc.config:
        raise GateError(f"{side} ({run_dir}) holds no configuration to measure again (--paired)")
    return RunConfig.from_dict(data.doc.config.to_json())


def measure_paired(run_dirs: list[Path], blocks: int, opts: GateOptions, stop: StopSignals) -> tuple[Verdict, float]:
    """Both configurations in ABBA blocks in one process; the verdict and the measure's wall time (s)."""
    from hwprof.advisor.children import paired_command, run_child
    from hwprof.rundir.advise_files import read_advise_result
    from hwprof.schema.advise_result import AdviseSpec

    if len(run_dirs) != 2:
        raise GateError(f"--paired gates two runs, BASE and NEW (got {len(run_dirs)})")
    base, new = run_config(run_dirs[0], "BASE"), run_config(run_dirs[1], "NEW")
    if (base.program is None) != (new.program is None):
        which = "BASE" if base.program is not None else "NEW"
        raise GateError(f"{which} is a user's program and the other run is not: --paired measures two of a kind")
    differ = differences(*(GateRun(str(p), identity=identity(c)) for p, c in zip(run_dirs, (base, new), strict=True)))
    refuse_differences(differ, opts)
    started = time.monotonic()
    if base.program is not None:
        by_run = program_blocks(base, new, blocks, stop)
        verdict = judge_paired(str(run_dirs[0]), str(run_dirs[1]), by_run, opts, BY_PROCESS)
        return verdict, time.monotonic() - started
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
    """What must match for a like-for-like gate, as hwprof.analysis.gate.inputs has it for a run."""
    keys = ("model", "imgsz", "batch", "runtime", "precision", "threads")
    return {key: str(getattr(config, key)) for key in keys}


Sides = dict[str, tuple[dict[int, float], dict[int, float]]]


def program_blocks(base: RunConfig, new: RunConfig, blocks: int, stop: StopSignals) -> Sides:
    """BASE's and NEW's programs run whole in ABBA order, `blocks` times: each run's median forward and iteration
    as its side's iteration 2b (the block's first run of that side) or 2b+1 (its second), as block_ratios reads
    them. A stop signal ends the measure with what the finished blocks hold."""
    import statistics

    sides: Sides = {"forward": ({}, {}), "iteration": ({}, {})}
    with tempfile.TemporaryDirectory(prefix="hwprof-gate-") as tmp:
        for b in range(blocks):
            for k, side in enumerate((0, 1, 1, 0)):  # A B B A
                if stop.requested:
                    return sides
                figures = _timed((base, new)[side], Path(tmp) / f"block{b}-{k}", stop)
                for name, attr in (("forward", "forward_ms"), ("iteration", "iteration_ms")):
                    values = list(getattr(figures, attr).values())
                    if values:
                        sides[name][side][2 * b + (k >= 2)] = statistics.median(values)
    return sides


def _timed(config: RunConfig, work: Path, stop: StopSignals) -> SideFigures:
    """One whole run of the program, its calls of its model timed (the program worker's mode "timed")."""
    from hwprof.advisor.children import run_child
    from hwprof.advisor.program_target import program_command
    from hwprof.advisor.program_worker import TIMED_MODE
    from hwprof.program.advise_calls import BASELINE
    from hwprof.rundir.advise_files import read_advise_result
    from hwprof.schema.advise_result import AdviseSpec

    work.mkdir(parents=True)
    out = work / "timed.json"
    spec = AdviseSpec.of(
        key="gate",
        baseline=config.to_dict(),
        variant=config.to_dict(),
        blocks=PROGRAM_CALLS // 2,
        warmup=max(PROGRAM_WARMUP, config.warmup),
        work_dir=str(work),
        mode=TIMED_MODE,
        out=str(out),
    )
    outcome = run_child(program_command(spec, work / "spec.json"), work / "worker.log", config.pass_timeout_s, stop,
                        lambda e: None)  # fmt: skip
    result = read_advise_result(out) if out.is_file() else None
    if stop.requested and (result is None or BASELINE not in result.sides):
        raise GateError("stopped by a signal during the paired measure")
    if not outcome.ok or result is None or result.error is not None or BASELINE not in result.sides:
        why = (result.error if result is not None else None) or outcome.error or "it wrote no figures"
        raise GateError(
            f"the paired measure's run of {' '.join(config.program.argv) if config.program else '?'} failed: {why}"
        )
    return result.sides[BASELINE]
