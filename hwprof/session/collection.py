"""A collection: plan passes from the registry, run each in a child process (hwprof.session.pass_process), assemble
the run directory.

Collectors that disturb one another run in separate passes (config.PASS_ORDER). run.json is written before the
first pass ("running") and again as each pass ends; whatever ends the collect (its passes done, a stop signal, a
full disk, an error of its own), it is finalised with the run's status, then the exports are written.
"""

from __future__ import annotations

import signal
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from hwprof.core.atomic import DiskFullError, SpaceReserve
from hwprof.core.config import RunConfig
from hwprof.core.gc_pause import gc_paused
from hwprof.core.secrets import masked_words
from hwprof.rundir.names import PASSES, RUN_JSON, WORKER_LOG
from hwprof.rundir.reader import SCHEMA_VERSION, RunData
from hwprof.rundir.worker_files import write_config, write_images
from hwprof.rundir.writer import write_run_json
from hwprof.schema.codec import JsonObject, json_value
from hwprof.schema.run import RunDoc
from hwprof.session.annotated import keep_annotated
from hwprof.session.child import error_line
from hwprof.session.outcome import PassOutcome
from hwprof.session.pass_inputs import images_doc
from hwprof.session.pass_process import PassProcesses, ProgressFn
from hwprof.session.plan import CollectError, PassPlan, Plan
from hwprof.session.rlimits import TaskLimitError
from hwprof.session.run_doc import interruption, peaks_doc, record_outcome
from hwprof.session.stopping import StopSignals
from hwprof.workload.images import ImageSet

if TYPE_CHECKING:
    from hwprof.analysis.run_analysis import Analysis
    from hwprof.session.disk_estimate import SizeEstimate


class Session(PassProcesses):
    """One collect: its passes run in turn (PassProcesses.run_pass), run.json around them, then its exports."""

    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        images: ImageSet,
        progress: ProgressFn | None = None,
        stop: StopSignals | None = None,
    ):
        super().__init__(config, run_dir, progress, stop)
        self.named_dir = run_dir
        """As the caller named it: the finished run is read from it, so that the paths in its report's
        warnings are those `hwprof report` of the same path gives."""
        self.images = images
        self.disk_estimate: SizeEstimate | None = None
        """run.json's disk_estimate (the CLI's), written after the passes section."""
        self.config_file: JsonObject | None = None
        """run.json's config_file: the `--config` file the options came from (its path, format and text)."""
        self.data: RunData | None = None
        """The finished run, read once (its markers parsed once) for the exports, the report and the trace."""
        self.analysis: Analysis | None = None
        """Its analysis, made for the exports (None when they were not written)."""
        self.final = "complete"
        """run.json's status when the collect ends: complete, partial (a pass did not end ok), failed, interrupted."""
        self.disk_full_stop = False
        """A full disk stopped the collect (run.json's error says where): no exports are tried."""

    def _write_inputs(self) -> None:
        write_config(self.run_dir, self.config)
        write_images(self.run_dir, images_doc(self.images))

    @property
    def where(self) -> str:
        """run.json's path, for the one-line error should a section gathered for it not be what it must."""
        return str(self.run_dir / RUN_JSON)

    def collect(self, plan: Plan, command_line: list[str]) -> RunDoc:
        """Run every pass and finalise run.json. A stop signal (or Ctrl-C) ends the pass in flight and skips
        the rest: run.json is then final with status "interrupted" and the signal, and collect returns
        normally; the caller turns that into its exit status. Only a second signal raises (Interrupted)."""
        reserve = SpaceReserve(self.run_dir)  # given back before the last run.json: it fits on a full disk
        self.final = "complete"
        try:
            with self.stop.deferred():  # a signal in it is raised after it: run.json is then final, interrupted
                self._start(plan, command_line)
            self.run.update(peaks=peaks_doc(self.config.threads, self.where))
            self._run_passes(plan)
        except KeyboardInterrupt:
            if not self.stop.requested:  # a caller without StopSignals (tests, the library)
                self.stop.note(signal.SIGINT)
            with self.stop.deferred():
                self._record_rest()
        except TaskLimitError as exc:  # a thread or process could not start: the line names the limit
            self._cut(str(exc))
            raise
        except CollectError:
            self.final = "failed"
            raise
        except DiskFullError as exc:  # the collection cannot go on: run.json says failed, and where
            self._record_rest(write=False)  # finalize writes it, after the reserve is given back
            self.final = "failed"
            self.run.update(error=str(exc))
            self.disk_full_stop = True
            raise
        except OSError as exc:
            if self.gone():  # whichever write found it first: the run directory, by name, is what happened
                raise self.gone_error() from exc
            self._cut(f"{type(exc).__name__}: {exc}")
            raise
        except Exception as exc:  # hwprof's own failure: never "complete"
            self._cut(f"{type(exc).__name__}: {exc}")
            raise
        finally:
            with self.stop.deferred():  # a signal at any instant of it (a lazy import's, a stat's) is raised after
                if self.zygote is not None:
                    self.zygote.close()
                    self.zygote = None
                if self.gone() or not self.run.status:  # nothing can be saved, or nothing was started
                    reserve.release()
                    end = False
                else:
                    with gc_paused():  # every pass's records read and tabled: many objects, none cyclic
                        end = self._finalize(plan, reserve)
            if end:
                with gc_paused():
                    self._export()
        return self.run

    def _cut(self, error: str) -> None:
        """The collect cannot go on (`error`): the passes that ended are recorded (finalize writes them), and the
        run ends partial where one of them ended ok, else failed."""
        self._record_rest(write=False)
        self.final = "partial" if self._any_ok() else "failed"
        self.run.update(error=error)

    def _any_ok(self) -> bool:
        """Whether a pass ended ok: a run without one has measured nothing whole, and is never complete."""
        return any(p.status == "ok" for p in self.run.passes.values())

    def _start(self, plan: Plan, command_line: list[str]) -> None:
        """The inputs every pass reads, and run.json as it stands before the first pass ("running")."""
        from hwprof.core.host import host_info

        self._write_inputs()
        self.run = RunDoc.of(
            schema_version=SCHEMA_VERSION,
            run_id=self.run_dir.name,
            status="running",
            created=datetime.now(UTC).isoformat(timespec="seconds"),
            command=json_value(masked_words(command_line)),
            config=self.config.recorded(self.where),
            host=host_info(),
            images=json_value(images_doc(self.images)),
            clock={"id": "CLOCK_MONOTONIC", "unit": "ns"},
            collectors=dict(plan.statuses),
            passes={},
        )
        if self.config_file is not None:
            self.run.update(config_file=self.config_file)
        if self.disk_estimate is not None:
            self.run.update(disk_estimate=json_value(self.disk_estimate.to_dict()))
        write_run_json(self.run_dir, self.run)

    def _run_passes(self, plan: Plan) -> None:
        """Each pass in turn, recorded in run.json as it ends, until a stop signal (the run is "partial" when
        one did not end ok). A full disk or a workload that cannot run (exit 3) raises. Each pass's worker may be
        launched beside the previous pass's close, held before its warm-up until that pass has ended
        (hwprof.session.turn); one whose turn does not come is dropped."""
        try:
            self._each_pass(plan)
        finally:
            with self.stop.deferred():
                self.drop_early()

    def _each_pass(self, plan: Plan) -> None:
        early = self.may_launch_early()
        for index, pass_plan in enumerate(plan.passes):
            if self.stop.requested:
                break
            self.passes_left = len(plan.passes) - index
            later = plan.passes[index + 1 :]
            self.next_plan = later[0] if early and later else None
            outcome = self.run_pass(pass_plan)
            if not self.stop.requested and self.programs.run_again(pass_plan, outcome, self._pass_dir(pass_plan)):
                self.outcomes.remove(outcome)
                outcome = self.run_pass(pass_plan)
            if outcome.name in self.disk_full:
                raise self.disk_full[outcome.name]
            program_failed = self.programs.ends_collect(outcome)
            with self.stop.deferred():
                self._record(outcome)
            self._expect(len(plan.passes) - index - 1, len(plan.passes))
            if outcome.status != "ok" or (outcome.program is not None and outcome.program.no_model):
                self.final = "partial"  # a program's run with no model has whole-process figures only
            if program_failed:
                break
            if outcome.limited:  # every later pass would run out as well
                raise TaskLimitError(outcome.error)
            if outcome.returncode == 3 and not self.stop.requested:
                # The workload itself failed (model, weights, images): every later pass would too.
                log = self.run_dir / PASSES / outcome.name / WORKER_LOG
                raise CollectError(error_line(log) or outcome.error)

    def _expect(self, left: int, total: int) -> None:
        """The collect's progress line: the passes done, and how long those left are expected to take (an
        estimate: hwprof.session.expected)."""
        from hwprof.session.expected import expected_left_s, expected_words
        from hwprof.session.worker_io import ProgressEvent

        resolving = bool(self.config.extra.get("timing_resolve"))
        seconds = expected_left_s(self.run_dir, self.outcomes, left, self.config.iters, resolving)
        if seconds is not None:
            phase = expected_words(seconds) if left > 0 else "every pass done"
            self.progress("collect", ProgressEvent(phase=phase, done=total - left, total=total))

    def _record_rest(self, write: bool = True) -> None:
        """Record the passes that ended but are not in run.json yet (the one a stop or a full disk ended)."""
        for outcome in self.outcomes[len(self.run.passes) :]:
            self._record(outcome, write=write)

    def _finalize(self, plan: Plan, reserve: SpaceReserve) -> bool:
        """run.json's final status and summary sections (finalize), whatever ended the collect; whether the
        exports are to be written (not after a full disk stopped it). Called in a deferred section: a second
        signal that came as the collect ended had left run.json "running" when it landed in this method's
        import of hwprof.session.finish, before its own deferred section."""
        from hwprof.session.finish import finalize

        if self.stop.requested:
            self.final = "interrupted"
            self.run.update(interrupted=interruption(self.run, plan, self.stop))
        elif self.final == "complete" and not self._any_ok():
            self.final = "failed"
        if self.config.annotate:
            self.run.update(annotated=keep_annotated(self.run_dir, self.run, Path(self.config.annotate)))
        self.run.update(status=self.final, finished=datetime.now(UTC).isoformat(timespec="seconds"))
        reserve.release()
        try:
            self.data = finalize(self.named_dir, self.run)
        except DiskFullError:
            if not self.disk_full_stop:  # else the first full write is the one to report
                raise
        return self.data is not None and not self.disk_full_stop

    def _export(self) -> None:
        """The exports of the final run: after a second signal too (a third one cuts them)."""
        from hwprof.session.finish import write_final_exports

        assert self.data is not None
        self.analysis = write_final_exports(self.data)

    def _pass_dir(self, plan: PassPlan) -> Path:
        return self.run_dir / PASSES / plan.name

    def _record(self, outcome: PassOutcome, write: bool = True) -> None:
        record_outcome(self.run, outcome, self.where)
        if write:
            write_run_json(self.run_dir, self.run)
