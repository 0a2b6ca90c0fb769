"""`hwprof advise RUN`: plan the candidates from the run, run each, and write advice.json after each one.

Per candidate: one paired worker (baseline and variant in ABBA blocks in one process), or, for a change
that needs a process of its own or a pairing that moved either side (advice_rows.pairing_note), three workers
one after the other, baseline, variant, baseline (a pass-level estimate), each with the other work on the
run's CPUs during it recorded (advice_rows.disturbance); then, for the contenders, a layers collect of the
variant against one of the baseline made the same way, for the layers that moved most (contender_layers.py).
advice.json is rewritten after every candidate, so a stop keeps every row finished.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from hwprof.advisor.children import ChildOutcome, child_env, run_child
from hwprof.advisor.contender_layers import CONTENDERS, NOT_CONTENDER, LayersCollects
from hwprof.advisor.facts import cpus_busy, run_facts
from hwprof.advisor.process_env import env_not_taken
from hwprof.advisor.program_budget import Budget, CallsSeen, calls_line, count_needed, refuse
from hwprof.advisor.program_failure import PROGRAM_FAILED_EXIT, stopped_by
from hwprof.advisor.program_target import count_calls
from hwprof.advisor.settle import Contender, Settling
from hwprof.advisor.targets import AdviseTarget, target_for
from hwprof.analysis.advice.candidate import Candidate, RunFacts
from hwprof.analysis.advice.candidates import selected
from hwprof.analysis.advice.combos import combo_decision, part_outcome
from hwprof.analysis.advice.interrupt import INTERRUPTED, interrupted_note, interrupted_rows
from hwprof.analysis.advice.race import FIRST_BLOCKS, NOT_AGAIN, SETTLE_SHARE, left_race, output_failed, race_bar
from hwprof.analysis.advice.rows import PROCESSES, busy, measured_row, not_run_row, pairing_note
from hwprof.analysis.advice.table import NOT_RUN, Advice, AdviceRow, contenders
from hwprof.core.config import ADVISE_BLOCKS, RunConfig
from hwprof.perf.neighbours import NeighbourLoad, NeighbourWatch
from hwprof.rundir.advise_files import read_advise_result, write_advice
from hwprof.rundir.reader import RunData
from hwprof.schema.advise_result import AdviseResult, AdviseSpec
from hwprof.schema.check import RunDirError
from hwprof.schema.summaries_cpu import PerfEventsSummary
from hwprof.session.stopping import Interrupted, StopSignals
from hwprof.session.worker_io import ProgressEvent
from hwprof.session.zygote import Zygote
from hwprof.workload.trained import is_trained

ADVISE_DIR = "advise"
INDUCTOR_CACHE = "inductor-cache"
"""A compile candidate's own Inductor cache folder (TORCHINDUCTOR_CACHE_DIR: FX graphs, generated kernels), empty
when its first process starts, so that process compiles cold: its row's setup time is what a first deployment
pays, never a warm cache's of an earlier advise. The processes after it (a re-measure as processes, when the
paired figure is withheld) load what it wrote instead of compiling again: on yolov7-tiny at 320 (2-vCPU EPYC)
each cold compile took 34-37 s, twice. Removed once the candidate is measured."""
Progress = Callable[[str, ProgressEvent], None]
"""(candidate key, a worker's progress event: its phase, done of total)."""


@dataclass
class AdvisePlan:
    run_dir: Path
    config: RunConfig
    facts: RunFacts
    candidates: list[Candidate]
    blocks: int = ADVISE_BLOCKS
    layers: bool = True
    """Run a layers collect per variant (and one of the baseline) for the layers that moved."""
    only: tuple[str, ...] = ()
    """advise --only: the keys asked for (a combination among them runs whatever its parts did)."""
    calls: CallsSeen | None = None
    """A program's: its calls of its model as the run saw them (hwprof.advisor.program_budget)."""
    budget: Budget | None = None
    """A program's: the calls each candidate's schedule needs."""
    prefix: str = ""
    """Of the options a refusal names: "" (hwprof advise) or "advise-" (collect --advise)."""

    @cached_property
    def target(self) -> AdviseTarget:
        """The advised workload, from the config: what advise asks instead of which workload ran
        (hwprof.advisor.targets)."""
        return target_for(self.config)

    def count_needed(self) -> int:
        """A program's calls to count before any candidate runs (program_budget.count_needed); 0: none."""
        return count_needed(self.budget, self.calls, self.runnable) if self.budget is not None else 0

    def calls_line(self) -> str:
        """A program's calls against its schedules, in one line ("" for the pipeline)."""
        return calls_line(self.budget, self.calls, self.runnable) if self.budget is not None else ""

    @property
    def runnable(self) -> list[Candidate]:
        """The single levers first, then the combinations (a second round: their parts measured first)."""
        ready = [c for c in self.candidates if not c.blocked]
        return [c for c in ready if not c.parts] + [c for c in ready if c.parts]


def plan_advice(
    run_dir: Path, blocks: int = ADVISE_BLOCKS, layers: bool = True, only: tuple[str, ...] = (), prefix: str = ""
) -> AdvisePlan:
    """The run's candidates; `only`: just these keys (advise --only), run whether a finding points to them or not;
    `prefix`: of the options a program's refusal names (collect's "advise-"). ValueError in one line where a
    program's run saw it end with too few calls of its model for the schedules (program_budget)."""
    from hwprof.analysis.run_analysis import analyse

    data = RunData.load(run_dir)
    if not data.doc.config:
        raise ValueError(f"{run_dir}/run.json holds no configuration to advise on")
    config = RunConfig.from_dict(data.doc.config.to_json())
    if config.attached is not None:
        raise ValueError(
            f"{run_dir} was attached to a running service (PID {config.attached}): advise runs each candidate in "
            "processes of its own, and a service's traffic cannot be replayed there; advise a collect of the same "
            "model instead (`hwprof collect --model NAME --advise`, or `hwprof collect --advise -- python DRIVER.py`)"
        )
    analysis = analyse(data)
    busy = None if data.doc.summary(PerfEventsSummary).model_thread_only else cpus_busy(analysis)
    facts = run_facts(data, config, busy)
    plan = AdvisePlan(Path(run_dir), config, facts, [], blocks, layers, tuple(only), prefix=prefix)
    planned = plan.target.candidates(data, facts, analysis.findings)
    plan.candidates = selected(planned, only) if only else planned
    plan.calls, plan.budget = plan.target.schedule(data, blocks)
    if plan.calls is not None and plan.budget is not None and plan.calls.exact:
        refuse(plan.calls, plan.budget, plan.runnable, run_dir, prefix, bool(only))
    return plan


def variant_config(config: RunConfig, candidate: Candidate) -> RunConfig:
    v = candidate.variant
    return dataclasses.replace(
        config,
        runtime=config.runtime if v.runtime is None else v.runtime,
        precision=config.precision if v.precision is None else v.precision,
        channels_last=config.channels_last if v.channels_last is None else v.channels_last,
        threads=config.threads if v.threads is None else v.threads,
        batch=config.batch if v.batch is None else v.batch,
    )


class AdviseRun:
    """Runs a plan's candidates one by one; `advice` holds the rows so far."""

    def __init__(self, plan: AdvisePlan, stop: StopSignals, progress: Progress) -> None:
        self.plan = plan
        self.stop = stop
        self.progress = progress
        self.dir = plan.run_dir / ADVISE_DIR
        self.advice = Advice(plan.target.baseline(), plan.config.device, [])
        self.advice.notes += plan.target.notes()
        self.layers = LayersCollects(self.dir, plan.config, stop, progress)
        self.loads: dict[str, NeighbourLoad | None] = {}
        """Other work on the run's CPUs during each worker of the candidate being measured."""
        self.combined: dict[str, str] = {}
        """A combination that runs -> why (advice_combos.combo_decision)."""
        self.reached: dict[str, tuple[int, int]] = {}
        """Candidate key -> its worker's last progress (done, total): where a stop cut it."""
        self.forks: Zygote | None = None
        self.layers_wanted: dict[str, tuple[Candidate, RunConfig]] = {}
        """Candidate key -> (it, its variant's config) for the rows whose layers a contender's collect would give."""
        self.started = time.monotonic()
        """When the candidates began (_run)."""
        self.settling = Settling(self.advice, self._measure, self.loads_of, lambda: self.stop.requested, self._save_now)

    def run(self) -> Advice:
        """Every runnable candidate, its paired workers forked by a zygote of advise's own where the target's
        workers may be (their imports paid once, not four times per candidate)."""
        modules = self.plan.target.forkable_workers()
        self.forks = Zygote.start(child_env(), modules) if modules and self.plan.runnable else None
        try:
            return self._run()
        finally:
            if self.forks is not None:
                self.forks.close()

    def _run(self) -> Advice:
        self.dir.mkdir(parents=True, exist_ok=True)
        started = self.started = time.monotonic()
        self.advice.started_ns = time.monotonic_ns()
        self._count_calls()
        for c in self.plan.candidates:
            if c.blocked:
                self.advice.rows.append(not_run_row(c))
        self._save(started)
        running: Candidate | None = None
        try:
            for running in self.plan.runnable:
                if self.stop.requested:
                    break
                row = self._combination(running) if running.parts or running.likely else None
                self.advice.rows.append(row or self._candidate(running))
                self._save(started)
            running = None
            self._settle(started)
            self._contenders_layers(started)
        except Interrupted:
            # the first stop signal came between a candidate's processes, with none running to forward it to (the
            # handler raises then): the candidate is cut as if its worker had been, and advise ends as after one
            if running is not None and all(r.key != running.key for r in self.advice.rows):
                self.advice.rows.append(self._failed(running, ""))
        checks = [r.output for r in self.advice.rows if r.output is not None]
        self.advice.notes += self.plan.target.closing_notes(checks)
        if self.stop.requested:
            self.advice.rows += interrupted_rows(self.plan.runnable, self.advice.rows)
            self.advice.notes.append(interrupted_note(self.stop.name, self.plan.runnable, self.advice.rows))
        self._save(started)
        return self.advice

    def _settle(self, started: float) -> None:
        """The race's end: the first rows' contenders given more blocks while their order is open
        (hwprof.advisor.settle), within SETTLE_SHARE of the time the candidates took; the order's note kept."""
        if self.stop.requested or not self.settling.contenders:
            return
        allowance = SETTLE_SHARE * (time.monotonic() - started)
        self.advice.notes.append(self.settling.run(allowance))
        self._save(started)

    def _count_calls(self) -> None:
        """A program's calls of its model counted before any candidate runs, where the run did not see them all
        (AdvisePlan.count_needed); ValueError in one line where they are too few."""
        need, budget = self.plan.count_needed(), self.plan.budget
        if not need or budget is None or self.stop.requested:
            return
        plan = self.plan
        counted = count_calls(
            plan.config, plan.run_dir, need - budget.before, self.dir, self.stop, lambda e: self.progress("count", e)
        )
        if counted is None:
            return
        calls = budget.before + counted
        how = "saw the program end after" if calls < need else "stopped the program after"
        self.plan.calls = CallsSeen(calls, calls < need, f"advise's count {how} {calls}")
        refuse(self.plan.calls, budget, plan.runnable, plan.run_dir, plan.prefix, bool(plan.only))
        self.advice.notes.append(
            f"the program's calls of its model were counted before the candidates ran ({self.plan.calls.source}): "
            f"the schedules need {need}"
        )

    def _combination(self, c: Candidate) -> AdviceRow | None:
        """A combination that the rule skips (advice_combos.combo_decision on its parts' rows so far): its not-run
        row; None where it runs (the row then says why)."""
        rows = {r.key: r for r in self.advice.rows}
        parts = {p: part_outcome(p, rows.get(p)) for p in c.parts}
        config = self.plan.config
        random = not config.weights and not is_trained(config.model)
        decision = combo_decision(c, parts, c.key in self.plan.only, random_weights=random)
        if decision.run:
            self.combined[c.key] = decision.why
            return None
        return AdviceRow(c.key, c.change, c.how, c.finding, status=NOT_RUN, reason=decision.why)

    def loads_of(self, name: str) -> NeighbourLoad | None:
        return self.loads.get(name)

    def _save_now(self) -> None:
        self._save(self.started)

    def _save(self, started: float) -> None:
        self.advice.ended_ns = time.monotonic_ns()
        self.advice.wall_s = round(time.monotonic() - started, 1)
        write_advice(self.plan.run_dir, self.advice.to_dict())

    def _candidate(self, c: Candidate) -> AdviceRow:
        config = self.plan.config
        variant = variant_config(config, c)
        work = self.dir / c.key
        work.mkdir(parents=True, exist_ok=True)
        spec = AdviseSpec.of(
            key=c.key,
            baseline=config.to_dict(),
            variant=variant.to_dict(),
            compile_mode=c.compile_mode,
            cuda_graph=c.cuda_graph,
            blocks=self.plan.blocks,
            first_blocks=FIRST_BLOCKS,
            race_bar=race_bar(self.advice.rows),
            warmup=max(1, config.warmup),
            work_dir=str(work / "work"),
            run_dir=str(self.plan.run_dir),
        )
        self.loads = {}
        shutil.rmtree(work / INDUCTOR_CACHE, ignore_errors=True)
        measuring = time.monotonic()
        try:
            results, error = self._measure(spec, work, c, ["paired"] if not c.env else list(PROCESSES))
            paired_s = time.monotonic() - measuring
            first = results.get("paired") or results.get("variant")  # the process that built the variant first
            note = pairing_note(results.get("paired"), self.plan.config.threads)
            if note and output_failed(results.get("paired")):
                note += f"; {NOT_AGAIN}"  # its speed is never advice: processes would only cost time
            # a move while other work took the CPUs: processes would be no cleaner, the row says not resolved
            elif note and not error and not self.stop.requested and not busy(self.loads.get("paired")):
                results, error = self._measure(spec, work, c, list(PROCESSES))
            else:
                note = ""
        finally:
            shutil.rmtree(work / INDUCTOR_CACHE, ignore_errors=True)
        if error:
            return self._failed(c, error)
        taken = env_not_taken(c.env, results["variant"].sides["variant"]) if "variant" in results else ""
        if taken:
            return self._failed(c, taken)
        built_first = first.sides["variant"] if first is not None else None
        row = measured_row(c, results, self.advice.blocks, self.loads, built_first)
        row.pairing_note = note
        if "paired" in results:
            row.race = left_race(results["paired"].stopped or "")
            if self.plan.budget is None:  # a program's calls were counted for the plan's blocks only
                self.settling.add(Contender(c, spec, work, [results["paired"]], paired_s, row.race))
        row.combination = self.combined.get(c.key, "")
        if fixed := self.plan.target.layers_note():  # the workload's: no candidate has layer times
            row.layers_note = fixed
        elif self.plan.layers and c.has_layers_pass:
            self.layers_wanted[c.key] = (c, variant)  # measured once the race is run (_contenders_layers)
        elif not c.has_layers_pass:
            row.layers_note = (
                "no per-layer times: Inductor fuses across layers"
                if c.compile_mode
                else "no per-layer times: a CUDA graph replays the whole forward"
            )
        return row

    def _measure(
        self, spec: AdviseSpec, work: Path, c: Candidate, modes: list[str]
    ) -> tuple[dict[str, AdviseResult], str]:
        """Run the worker for each name (its mode: the name's first word), each process's neighbours in
        self.loads; (results by name, "") or ({}, why one failed)."""
        results: dict[str, AdviseResult] = {}
        for name in modes:
            mode = name.split("-")[0]
            out = work / f"{name}.json"
            watch = NeighbourWatch().start()
            outcome = self._worker(spec.for_mode(mode, str(out)), work, c, name)
            self.loads[name] = watch.stop()
            try:
                result = read_advise_result(out)
            except RunDirError as exc:  # a damaged out file: the candidate fails, saying which field
                return {}, str(exc)
            if outcome.returncode == PROGRAM_FAILED_EXIT and result.error:  # the unchanged program failed: stop
                raise stopped_by(result.error, f"{name} run for {c.key}", work / f"{name}.log")
            if not outcome.ok or result.error is not None:
                return {}, result.error or outcome.error
            results[name] = result
        return results, ""

    def _worker(self, spec: AdviseSpec, work: Path, c: Candidate, name: str) -> ChildOutcome:
        command = self.plan.target.worker_command(spec, work / f"{name}.spec.json")
        env = dict(c.env) if spec.mode == "variant" else {}
        if c.compile_mode:
            env["TORCHINDUCTOR_CACHE_DIR"] = str(work / INDUCTOR_CACHE)
        return run_child(
            command,
            work / f"{name}.log",
            self.plan.config.pass_timeout_s,
            self.stop,
            lambda e: self._progress(c.key, e),
            env,
            self.forks,
        )

    def _progress(self, key: str, event: ProgressEvent) -> None:
        if event.done is not None and event.total:
            self.reached[key] = (event.done, event.total)
        self.progress(key, event)

    def _failed(self, c: Candidate, error: str) -> AdviceRow:
        budget = self.plan.budget  # a program's: where its schedule was cut (0 of it: before the model's first call)
        done, total = self.reached.get(c.key) or (0, budget.needs(c) - budget.before if budget else 0)
        calls = f" at {done} of {total} calls of the model" if budget is not None else ""
        what = f"{INTERRUPTED}{calls}" if self.stop.requested else error
        return AdviceRow(c.key, c.change, c.how, c.finding, status="failed", reason=what)

    def _contenders_layers(self, started: float) -> None:
        """The layers collects, the costliest part of a row (a timing and a layers pass of the variant), for the
        contenders only: the CONTENDERS fastest rows measured with their output checked (contenders); the others
        say why they have none. Before, every row had one: 10 of the 15 candidates on yolov7-tiny at 320 were
        slower, changed the output or were not resolved, and their collects took most of advise's time."""
        rows = {r.key: r for r in self.advice.rows}
        chosen = contenders(self.advice.rows, CONTENDERS)
        for key, (c, variant) in self.layers_wanted.items():
            row = rows.get(key)
            if row is None or self.stop.requested:
                continue
            if key in chosen:
                self.layers.fill(row, c, variant)
                self._save(started)
            else:
                row.layers_note = NOT_CONTENDER
