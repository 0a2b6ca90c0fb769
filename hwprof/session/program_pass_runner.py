"""One pass over the user's own program (`hwprof collect -- python SCRIPT ...`), in the pass's worker process.

The same PassRunner as the built-in pipeline's (collectors opened before torch, closed whatever happens, result.json
written), but the program drives the loop: it runs in this process (hwprof.program.launch), the model is found at its
calls (hwprof.program.finder), and each call is a warm-up, measured or clean iteration (hwprof.program.driver; what
the pass does at each: hwprof.session.program_moments). What the pass found and how the program ended is
result.json's `program`.

A program that calls no model (no torch module, or none more than once) runs to its end: its pass is "ok" and its
per-forward collectors say they are unavailable, with the reason. The session then runs the later passes, and
again a pass that found this out and holds a whole-process collector, in whole-process mode (WHOLE_PROCESS_ENV):
the program's whole run is one iteration holding one stage, "program", and only the collectors that need no
forward (Collector.whole_process: perf's kernels, py-spy, Scalene) start around it.

The program's own failure (an exception, a non-zero sys.exit) fails its pass with its one line; its traceback is
in the pass's worker.log. The worker then exits EXIT_PROGRAM_FAILED, not EXIT_ERROR: the session keeps running
the later passes unless the program failed before its first measured call (hwprof.session.program_passes). An
ambiguous model, or a --program-model name that never matched, is the command's fault: EXIT_ERROR, and the
collect ends with that one line.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from hwprof import stage_api
from hwprof.collectors.base import Collector, CollectorResult
from hwprof.core.program_spec import PROGRAM_SPAN, WHOLE_PROCESS_ENV, ProgramSpec
from hwprof.program.child_watch import (
    MEASURE_IN_PROCESS,
    children_text,
    fork_place,
    read_children,
    spawned_children_watched,
    watch_child,
)
from hwprof.program.driver import ProgramDriver, ProgramStop
from hwprof.program.finder import ModelFinder, ProgramAbort
from hwprof.program.known_stages import known_targets
from hwprof.program.launch import STDIN_EOF, ProgramEnd, run_program, stdin_eof_read
from hwprof.program.other_models import OtherModels
from hwprof.program.own_end import OwnEnd, OwnEndHooks, real_exit
from hwprof.program.stage_hooks import StageHooks
from hwprof.program.thread_stop import MainThreadStop
from hwprof.rundir.names import PROGRAM_CHILDREN, WORKER_LOG
from hwprof.rundir.pass_files import write_pass_result
from hwprof.schema.pass_files import PassResult
from hwprof.schema.program import ProgramOutcome
from hwprof.session.pass_runner import ERROR_PREFIX, EXIT_PROGRAM_FAILED
from hwprof.session.program_moments import ProgramMoments
from hwprof.session.program_record import program_outcome
from hwprof.session.worker_io import pin_stdout, progress
from hwprof.session.worker_stop import STOP, Interrupted

if TYPE_CHECKING:
    from hwprof.core.markers import Kind

NO_CLOSE = "its collectors were not closed, and this pass's figures are lost"
NOT_RUN_AGAIN = (
    "an earlier pass found no model, and this pass's collectors measure per forward, so the program was not run again"
)


class ProgramPassRunner(ProgramMoments):
    def __init__(self, run_dir: Path, pass_name: str, names: list[str]) -> None:
        super().__init__(run_dir, pass_name, names)
        assert self.config.program is not None
        self.spec = self.config.program
        self.finder: ModelFinder | None = None
        self.end: ProgramEnd | None = None
        self.found_none = os.environ.pop(WHOLE_PROCESS_ENV, "")
        """Whole-process mode: why an earlier pass found no model (the program's children do not inherit it)."""
        self.whole_process = bool(self.found_none)
        self.no_model: str | None = None
        """Why no model was measured (one line), once the pass knows there is none."""
        self._program_failed = False
        self.own_end = OwnEndHooks(self._on_own_end, STOP._handle)
        self.others = OtherModels()
        """The program's other models, timed as stages of their own from the warm-up's end on."""
        self.main_stop = MainThreadStop(ends=(ProgramStop, ProgramAbort, Interrupted))
        """hwprof's end of the program, raised in a worker thread that calls the model, is raised in the main one."""
        self._sink: Any = None

    def _build(self) -> str:
        """Nothing is built before the program runs: the finder waits for its calls."""
        import torch

        torch.set_num_threads(self.config.threads)
        pin_stdout()  # the program's sys.stdout is the log: the progress lines keep the pass's stdout
        progress(phase="build", done=0, total=1)
        self.driver = ProgramDriver(self.bus, self, self.config.warmup, end=self.spec.end)
        self.driver.ends = self.main_stop.ends
        self.driver.end_elsewhere = self.main_stop.end_elsewhere
        self.finder = ModelFinder(on_found=self.driver.adopt, model_path=self.spec.model_path)
        self.finder.end_elsewhere = self.main_stop.end_elsewhere
        self.driver.on_warmup_end = self._warmup_over
        os.register_at_fork(after_in_child=self._in_forked_child)
        return "torch"

    def _measure(self, runtime_name: str) -> None:
        assert self.driver is not None and self.finder is not None
        if self.whole_process:
            self._measure_whole()
            return
        STOP.bus = self.bus  # a signal before the model is found stops the program at once: no span is open
        self.stages = program_stages(self.spec)
        self.stages.install()
        self._sink = stage_api.set_sink(self.driver.stage_sink)
        self.finder.install()
        self.own_end.install()
        self.main_stop.install()
        try:
            with spawned_children_watched(self._children_dir):
                self.end = run_program(self.spec)
            self.driver.settle()
        except ProgramAbort as exc:
            if exc.__cause__ is not None:  # hwprof's own failure inside the program's call: its traceback to the log
                traceback.print_exception(exc.__cause__, file=sys.stderr)
            raise ProgramFailed(str(exc)) from None
        finally:
            self._program_over()
        self._after_program()

    def _warmup_over(self) -> None:
        """The finder's global hooks come off; the program's other models are timed as stages of their own."""
        assert self.driver is not None and self.finder is not None and self.driver.found is not None
        self.finder.close()
        taken = {t.stage for t in [*self.spec.stage_targets(), *known_targets()]}
        self.others.wrap(list(self.finder.roots.values()), self.driver.found.module, taken)

    def _program_over(self) -> None:
        """The program's run is over (however it ended): hwprof's hooks off, the driver's schedule closed."""
        assert self.driver is not None and self.finder is not None
        self.others.close()
        self.own_end.close()
        self.main_stop.close()
        self.finder.close()
        self.driver.finish()
        if self.stages is not None:
            stage_api.set_sink(self._sink)
            self.stages.close()
        STOP.disarm()

    def _after_program(self) -> None:
        """What the program's run leaves the pass to do (hwprof's own forwards, now outside its calls) and to say:
        its failure (ProgramFailed), no model, too few calls."""
        assert self.driver is not None and self.finder is not None and self.stages is not None
        self._own_forwards_after()
        self.notes.extend(self.stages.unresolved())
        self._check_end()
        children = self.children()
        if self.driver.found is None and children is not None:
            raise ProgramFailed(
                f"the program's own process called no model, its children did: {children}; " + MEASURE_IN_PROCESS
            )
        if self.driver.found is None and self.spec.model_path is not None:
            raise ProgramFailed(self.finder.never_found() + self._stdin_eof())
        if self.driver.found is None:
            self.no_model = self.finder.never_found() + self._stdin_eof()
            print(f"no model: {self.no_model}", file=sys.stderr)
            return
        if children is not None and not self.driver.calls.measured:
            raise ProgramFailed(
                f"the program's own process made no measured call of {self.driver.model_label()}, its children "
                f"called modules: {children}; {MEASURE_IN_PROCESS}"
            )
        if children is not None:
            self.notes.append(f"not measured: {children} ({MEASURE_IN_PROCESS})")
        measured = self.driver.calls.measured
        planned = sum(1 for is_measured, _ in self.driver.steps if is_measured) or self.config.iters
        if measured < planned:
            self.notes.append(
                f"the program ended after {self.driver.calls.seen} calls of the model: "
                f"{measured} measured of the {planned} this pass's schedule asked (--iters {self.config.iters})"
            )

    def _own_forwards_after(self) -> None:
        """The program ended (or was stopped): hwprof's own forwards run now, outside its calls and unmarked: the
        layer table's, where no marked call filled it, and the collectors' (Collector.after_workload)."""
        driver, pipeline = self.driver, self.ctx.pipeline
        if driver is None or driver.found is None or pipeline is None:
            return
        if self._remove_hooks is not None:
            self._remove_hooks()
            self._remove_hooks = None
        with driver.internal():
            try:
                self._write_layers(forward=True)
            except Exception as exc:
                if self.end is not None and not self.end.ok:  # the program's own failure says more
                    print(f"the layer table after the program failed: {exc}", file=sys.stderr)
                    return
                raise ProgramFailed(f"hwprof could not make the layer table of {driver.found.name}: {exc}") from exc
            self._each("after_workload", self.ctx)

    def _stdin_eof(self) -> str:
        """Where the program read end of file on stdin (hwprof gives it /dev/null): said after its failure or
        silence, which may follow from it."""
        if self.end is None or not self.end.stdin_eof:
            return ""
        return f"; it read end of file on stdin ({STDIN_EOF})"

    def _on_own_end(self, end: OwnEnd) -> NoReturn:
        """The program called os._exit or sent itself a fatal signal (hwprof.program.own_end): the pass ends here,
        as it would after the program's return, and the worker exits; nothing returns to the program. From a
        thread other than the model's, or inside a forward, the collectors may be mid-call: none is closed, and
        result.json says how the program ended and that the pass's figures were lost."""
        assert self.driver is not None
        self.end = ProgramEnd(end.how, exit_code=end.code, error=end.text(), stdin_eof=stdin_eof_read())
        status, error = "ok", ""
        if threading.current_thread() is not threading.main_thread() or self.driver.in_forward:
            self.bus.halted = True
            error = f"the program {end.text()} inside a call of its model or from another thread: {NO_CLOSE}"
            write_pass_result(self.ctx.out_dir, self._bare_result(error))
            real_exit()(EXIT_PROGRAM_FAILED)
        try:
            self._program_over()
            self._after_program()
        except ProgramFailed as exc:
            status, error = "failed", str(exc)
            print(ERROR_PREFIX + error, file=sys.stderr, flush=True)
        except BaseException as exc:  # whatever happens, the worker must end here
            status, error = "failed", f"{type(exc).__name__}: {exc}"
        try:
            status, error = self._end(status, error)
        finally:
            sys.stderr.flush()
            real_exit()(self._exit_status(status))

    def _bare_result(self, error: str) -> PassResult:
        return PassResult.of(
            pass_name=self.ctx.pass_name,
            status="failed",
            error=error,
            finished_ns=time.monotonic_ns(),
            program=self._program_outcome("failed", error),
        )

    def _check_end(self) -> None:
        """ProgramFailed, with the program's own failure in one line, when it did not end well."""
        assert self.end is not None and self.driver is not None
        if self.end.ok:
            return
        how = {"exit": f"exited with status {self.end.exit_code}", "failed": f"raised {self.end.error}"}.get(
            self.end.how, self.end.error or self.end.how
        )
        seen = f"after {self.driver.calls.seen} calls of its model" if self.driver.found else "before any model"
        where = self.ctx.relpath(self.ctx.out_dir / WORKER_LOG)
        self._program_failed = True
        log = f"its traceback: {where}" if self.end.how == "failed" else f"its log: {where}"
        raise ProgramFailed(f"the program {how} {seen}{self._stdin_eof()} ({log})")

    def _measure_whole(self) -> None:
        """No model (an earlier pass found none): the program's whole run is one measured iteration holding one
        stage, PROGRAM_SPAN, under the collectors that need no forward; the others are not started."""
        whole = [c for c in self.collectors if c.whole_process and self._ok(c)]
        self.no_model = self.found_none
        if not whole:
            self.notes.append(NOT_RUN_AGAIN)
            return
        self.bus.keep_spans(self.log)
        for collector in sorted(whole, key=lambda c: c.order):
            if collector.subscribes:
                self.bus.subscribe(self._guarded(collector), collector.wants_layer_markers())
        for stage in ("prepare", "start"):
            for collector in whole:
                if self._ok(collector):
                    self._call(collector, stage, self.ctx)
        STOP.bus = self.bus
        self.bus.iteration, self.bus.warmup = 0, False
        whole_span: list[tuple[Kind, str]] = [("iteration", "iteration"), ("stage", PROGRAM_SPAN)]
        self.bus.emit_together("B", whole_span)
        self.log.flush_to(self.markers_path)
        progress(phase="measure", done=0, total=1)
        try:
            self.end = self._run_whole()
        finally:
            self.bus.emit_together("E", whole_span)
            for collector in whole:
                if self._ok(collector):
                    self._call(collector, "stop", self.ctx)
        progress(phase="measure", done=1, total=1)
        self._check_end()

    def _run_whole(self) -> ProgramEnd:
        """The whole run the whole-process collectors measure: the program's, to its end."""
        return run_program(self.spec)

    def _final_result(self, collector: Collector, result: CollectorResult) -> CollectorResult:
        """No model: a collector that measures per forward (or any, in the pass that found out) is unavailable."""
        if self.no_model is None or self._program_failed or (self.whole_process and collector.whole_process):
            return result
        return CollectorResult("unavailable", reason=f"{self.no_model}; its figures are per forward of a model")

    def _exit_status(self, status: str) -> int:
        if status == "failed" and self._program_failed:
            return EXIT_PROGRAM_FAILED
        return super()._exit_status(status)

    def _is_user_error(self, exc: BaseException) -> bool:
        return isinstance(exc, ProgramFailed) or super()._is_user_error(exc)

    def _in_forked_child(self) -> None:
        """A process the program forks (a DataLoader worker, a child that calls the model) measures nothing: its
        markers would reach the parent's collectors' copies. It is watched (hwprof.program.child_watch): the run
        says which modules it called."""
        self.bus.halted = True
        if self.driver is not None:
            self.driver.done = True
        if self.finder is not None:
            self.finder.close()
        self.main_stop.close()
        if self.end is None:  # forked while the program runs (not by a collector after it)
            watch_child(self._children_dir, "fork", fork_place())

    @property
    def _children_dir(self) -> Path:
        return self.ctx.out_dir / PROGRAM_CHILDREN

    def children(self) -> str | None:
        """Which of the program's children called torch modules (one line), None where none did."""
        return children_text(read_children(self._children_dir))

    def _program_outcome(self, status: str, error: str) -> ProgramOutcome:
        return program_outcome(self, status)


def program_stages(spec: ProgramSpec) -> StageHooks:
    """The functions timed as stages: the --stage ones, and those hwprof knows that no --stage names again."""
    user = spec.stage_targets()
    named = {(t.module, t.attr) for t in user}
    known = [t for t in known_targets() if (t.module, t.attr) not in named]
    main_names = (spec.module,) if spec.module is not None else (spec.name,)
    return StageHooks([*user, *known], user=user, main_names=main_names)


class ProgramFailed(Exception):
    """The program's pass cannot give figures; the message is one line."""
