"""One pass of a collection, in its child process (started as `python -P -m hwprof.session.worker RUN_DIR PASS
C1,C2`, hwprof.session.worker).

The runner reads config.json and images.json from the run directory, opens the pass's collectors before torch is
imported, builds the model, runs warm-up and measured iterations with markers, and always closes every collector
(each hook guarded: hwprof.session.pass_collectors), so a pass stopped by an error, SIGTERM or Ctrl-C still leaves
what it measured. A pass whose layer hooks or collectors switch off in-process also runs as many clean iterations,
interleaved with the measured ones in ABBA blocks (hwprof.session.paired), so that it measures its own cost
(hwprof.analysis.paired_cost). Progress goes to stdout as JSON lines for the parent; logs go to stderr.
"""

from __future__ import annotations

import gc
import signal
import sys
import time
import traceback
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from hwprof.collectors.base import PassContext
from hwprof.core.atomic import DiskFullError
from hwprof.core.gc_pause import gc_paused
from hwprof.core.markers import MarkerBus, MarkerLog
from hwprof.rundir.names import MARKERS
from hwprof.rundir.pass_files import write_pass_result
from hwprof.rundir.worker_files import read_config, read_image_paths
from hwprof.schema.pass_files import PairedInfo, PassResult
from hwprof.schema.program import ProgramOutcome
from hwprof.session.late_imports import wait_imports
from hwprof.session.pass_result import close_pipeline, pass_result
from hwprof.session.pass_steps import PassSteps
from hwprof.session.pass_stop import PassStopping
from hwprof.session.turn import launched_early, wait_turn
from hwprof.session.worker_io import disk_full_exit, is_user_error, one_line, progress
from hwprof.session.worker_model import finish_runtime, prepare_runtime, write_model_info
from hwprof.session.worker_stop import STOP, STOP_SIGNALS, Interrupted

if TYPE_CHECKING:
    from hwprof.session.warmup import Warmth

EXIT_OK = 0
EXIT_ERROR = 3
EXIT_INTERRUPTED = 130
EXIT_PROGRAM_FAILED = 4
"""A user's program failed in the pass (hwprof.session.program_pass_runner): unlike EXIT_ERROR, hwprof's command itself
could run, and later passes may (hwprof.session.program_passes)."""
ERROR_PREFIX = "hwprof-error: "


class PassRunner(PassSteps):
    def __init__(self, run_dir: Path, pass_name: str, names: list[str]) -> None:
        self.run_dir = run_dir
        config = read_config(run_dir)
        self.images = read_image_paths(run_dir)
        self.bus = MarkerBus()
        ctx = PassContext(config, run_dir, pass_name, self.bus)
        ctx.out_dir.mkdir(parents=True, exist_ok=True)
        super().__init__(config, ctx, names)
        self.log = MarkerLog()
        self.markers_path = self.ctx.out_dir / MARKERS
        self.paired: PairedInfo | None = None
        self._remove_hooks: Callable[[], None] | None = None
        self._done = 0
        """Iterations run so far (warm-up included), for progress."""
        self.warmups = self.config.warmup
        """The warm-up iterations it ran (by default until warm: hwprof.session.warmup)."""
        self.warmth: Warmth | None = None
        """The warm-up rule's last verdict, where it applied."""
        self.init_steps()

    def _pairs(self, runtime_name: str) -> bool:
        """Interleave clean iterations (hwprof.session.paired) when the layer hooks or a collector of the pass can
        be switched off in-process; records which were and which stayed on (their cost is in both sides)."""
        live = [c for c in self.collectors if self._ok(c)]
        switched = [c.name for c in live if c.switchable]
        hooks = ["layer markers"] if self._remove_hooks is not None else []
        wanted = self.config.extra.get("paired", True) and all(c.clean_iterations for c in live)
        if self.ctx.pass_name == "timing" or runtime_name != "torch" or not (hooks or switched) or not wanted:
            return False
        self.paired = PairedInfo.of(switched=[*hooks, *switched], always_on=[c.name for c in live if not c.switchable])
        return True

    def set_clean(self, clean: bool) -> None:
        """Into a clean iteration (switchable collectors paused, layer hooks off) or out of it."""
        switchable = [c for c in self.collectors if c.switchable and self._ok(c)]
        if clean:
            for collector in switchable:
                self._call(collector, "pause", self.ctx)
            if self._remove_hooks is not None:
                self._remove_hooks()
            self.clean_iteration = True
            return
        self.clean_iteration = False
        if self._remove_hooks is not None:
            self._remove_hooks = self._attach_markers()
        for collector in switchable:
            if self._ok(collector):
                self._call(collector, "resume", self.ctx)

    def _step(self, measured: bool, i: int, total: int) -> None:
        """One measured (or, in a paired pass, clean) iteration, its markers written at once."""
        assert self.ctx.pipeline is not None
        if measured:
            self.ctx.pipeline.run_iteration(i, warmup=False)
            self._each("after_iteration", self.ctx, i)
        else:  # clean: switchable collectors paused, markers only to those asking for clean_markers, hooks off
            self.set_clean(True)
            try:
                self.ctx.pipeline.run_iteration(i, warmup=False, clean=True)
            finally:
                self.set_clean(False)
        self.log.flush_to(self.markers_path)
        self._done += 1
        progress(phase="measure", done=self._done, total=max(total, self._done))
        STOP.check(self._done, max(total, self._done))

    def run(self) -> int:
        status, error = "ok", ""
        try:
            self._each("open", self.ctx)
            runtime_name = self._build()
            self._measure(runtime_name)
        except (Interrupted, KeyboardInterrupt) as exc:
            status, error = "interrupted", str(exc) or "KeyboardInterrupt"
        except Exception as exc:
            status, error = "failed", f"{type(exc).__name__}: {exc}"
            self._note_disk_full(exc)
            if not self._is_user_error(exc):
                traceback.print_exc(file=sys.stderr)
            print(ERROR_PREFIX + one_line(exc), file=sys.stderr, flush=True)
        finally:
            status, error = self._end(status, error)
        if self.disk_full is not None:
            return disk_full_exit(self.disk_full)
        return self._exit_status(status)

    def _exit_status(self, status: str) -> int:
        """EXIT_ERROR for a failed pass: the workload cannot run, and the session runs no later pass."""
        return {"ok": EXIT_OK, "interrupted": EXIT_INTERRUPTED}.get(status, EXIT_ERROR)

    def _is_user_error(self, exc: BaseException) -> bool:
        """An error whose one line says it all: no traceback of hwprof's own code in the pass's log."""
        return is_user_error(exc)

    def _build(self) -> str:
        """Build the model and its runtime (model.json, the runtime's output check), subscribe the collectors,
        prepare them and put the layer hooks on; the runtime's name."""
        import torch

        from hwprof.workload.init_scale import build_for_run
        from hwprof.workload.pipeline import Pipeline
        from hwprof.workload.runtimes import make_runtime

        # launched beside the previous pass's close (hwprof.session.turn): built on one thread, beside that pass's
        # close on the other CPU; two OpenMP threads spinning against it took 2-3x as long (yolov7 640: 1.2-1.4 s)
        torch.set_num_threads(1 if launched_early() else self.config.threads)
        progress(phase="build", done=0, total=1)
        built = build_for_run(self.config, self.images, self.run_dir)
        runtime = make_runtime(
            self.config, built, self.run_dir, self.ctx.out_dir, profile=self.ctx.pass_name != "timing"
        )
        self.ctx.pipeline = Pipeline(self.config, self.bus, self.images, built, runtime, self._annotate_to())
        write_model_info(self.ctx.pipeline, self.ctx.out_dir, self.config.depth)
        prepare_runtime(self.ctx.pipeline, self.run_dir, self.config)
        self._wire(layer_markers=runtime.name == "torch")
        # The model, its runtime and the imports never become garbage: the collections during the measured
        # iterations and the collectors' close skip them (gc.freeze). A worker's own process: never a user's.
        gc.collect()
        gc.freeze()
        return runtime.name

    def _annotate_to(self) -> Path | None:
        """The pass's own copy of the annotated output (--annotate), or None."""
        if not self.config.annotate:
            return None
        from hwprof.workload.annotate import pass_output
        from hwprof.workload.images import is_video_input

        return pass_output(self.ctx.out_dir, Path(self.config.annotate), is_video_input(self.images))

    def _wire(self, layer_markers: bool) -> None:
        """The model is built: the collectors subscribed and prepared, then the layer hooks put on."""
        self.bus.keep_spans(self.log)
        for collector in sorted(self.collectors, key=lambda c: c.order):
            if collector.subscribes and self._ok(collector):
                self.bus.subscribe(self._guarded(collector), collector.wants_layer_markers())
        self._each("prepare", self.ctx)
        hooks_wanted = self.ctx.pass_name != "timing" or any(c.needs_layer_markers for c in self.collectors)
        if hooks_wanted and layer_markers:
            # After prepare(): one-off forwards there (the FLOP count) are not layer spans.
            self._remove_hooks = self._attach_markers()

    def _attach_markers(self) -> Callable[[], None]:
        """The layer markers put on the model's layers (on CUDA, the runtime's device copy); returns their removal."""
        from hwprof.core.markers import attach_layer_markers

        pipeline = self.ctx.pipeline
        assert pipeline is not None
        module = getattr(pipeline.runtime, "marker_module", pipeline.built.module)
        return attach_layer_markers(module, self.bus, self.config.depth)

    def _measure(self, runtime_name: str) -> None:
        """Warm-up, then the measured (and, paired, clean) iterations between the collectors' start and stop."""
        from hwprof.session.paired import schedule

        assert self.ctx.pipeline is not None
        # launched beside the previous pass's close: nothing read of it (the iterations' plans, the warm-up's
        # reference) and nothing run until it has ended
        # (its wait bounded by twice its time-out: the previous pass's own, then the reading of its tools)
        if wait_turn(2 * self.config.pass_timeout_s, lambda: progress(phase="waiting", done=0, total=1)) is not None:
            import torch

            torch.set_num_threads(self.config.threads)  # its turn: the run's threads from the warm-up on
        iters = self._measured_iterations()
        steps = schedule(iters) if self._pairs(runtime_name) else [(True, i) for i in range(iters)]
        total = self.config.warmup + len(steps)
        STOP.bus, STOP.at_boundaries = self.bus, True
        STOP.check(0, total)
        wait_imports()  # a worker forked before the zygote's late imports: no forward of it runs beside them
        progress(phase="warmup", done=0, total=total)  # where the build ends (hwprof.session.pass_phases)
        self.warmups = self._warm_up(total)
        total -= self.config.warmup - self.warmups
        self.log.flush_to(self.markers_path)
        self._each("start", self.ctx)
        progress(phase="measure", done=self._done, total=total)  # the collectors started: the measuring begins
        STOP.check(self.warmups, total)
        planned_at = time.monotonic()
        out = self._run_steps(steps, iters, total)
        if self.paired is not None and not out and not (isinstance(self.stopping, PassStopping) and self.stopping.ends):
            self._extend(iters, time.monotonic() - planned_at)
            if self.config.extra.get("timing_resolve"):
                self._paired_ends(iters)  # what the plan and its extension left unresolved, said
        STOP.disarm()
        self._each("stop", self.ctx)
        # the measuring is over: the collect may launch the next pass beside this one's close (hwprof.session.turn)
        progress(phase="closing", done=self._done, total=self._done)

    def _warm_up(self, total: int) -> int:
        """The warm-up iterations, numbered up to -1; by default (hwprof.session.warmup) until the process is warm,
        then the last one (-1) where a collector does something of its own in it, else config.warmup of them.
        Returns how many ran."""
        from hwprof.core.spans import durations_ms, pair_spans
        from hwprof.session import warmup

        assert self.ctx.pipeline is not None
        most = self.config.warmup
        steady = warmup.steady(self.config)
        wants_last = any(c.last_warmup for c in self.collectors if self._ok(c))
        held_to = (
            None if self.ctx.pass_name == "timing" or not steady else warmup.reference(self.run_dir, self.ctx.pass_name)
        )
        index, done = -most, 0
        while done < most:
            self.ctx.pipeline.run_iteration(index, warmup=True)
            done = self._done = done + 1
            progress(phase="warmup", done=done, total=total)
            STOP.check(done, total)
            if index == -1:
                break
            if steady:
                forwards = durations_ms(pair_spans(self.log.markers), "stage", warmup=True).get("forward", [])
                self.warmth = warmup.check(forwards, held_to)
                if self.warmth.warm and not wants_last:
                    break
                if self.warmth.warm:
                    index = -1  # the last warm-up iteration, its collectors' own (a probe, the ops' shapes)
                    continue
            index += 1
        return done

    def _end(self, status: str, error: str) -> tuple[str, str]:
        """Whatever ended the pass: stop signals ignored, the runtime's files and the markers written, every
        collector closed and result.json written; the pass's (status, error), a full disk's failure included."""
        STOP.disarm()
        self._ignore_stop_signals()
        with self._closing_gc():
            finish_runtime(self.ctx.pipeline, self.log, self.config.depth, self.ctx.out_dir)
            closing = close_pipeline(self.ctx.pipeline)
            if closing is not None and status == "ok":
                status, error = "failed", closing
            try:
                self.log.flush_to(self.markers_path)
            except DiskFullError as exc:  # the collectors must still be closed
                self._note_disk_full(exc)
                status, error = "failed", str(exc)
            self._close_all(status, error)
        return status, error

    def _closing_gc(self) -> AbstractContextManager[None]:
        """Python's GC while the collectors close: held off, in a worker that ends after (gc_pause)."""
        return gc_paused()

    def _ignore_stop_signals(self) -> None:
        """A stop signal while the collectors close is ignored: the worker is ending anyway (a process of its own; an
        attached service's are its own to keep: hwprof.agent)."""
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)

    def _close_all(self, status: str, error: str) -> None:
        if status == "interrupted":
            self.ctx.interrupted = error
        results = self._close_each(status, error)
        self._write_replayed()
        result = pass_result(
            PassResult.of(
                pass_name=self.ctx.pass_name,
                status=status,
                error=error,
                finished_ns=time.monotonic_ns(),
                collectors={n: r.entry() for n, r in results.items()},
                paired=self.paired,
            ),
            self.ctx.pipeline,
            self.ctx.relpath,
            self.bus.inputs,
        )
        program = self._program_outcome(status, error)
        if program is not None:
            result.update(program=program)
        if self.stopping is not None:
            doc = self.stopping.doc()
            if self.floor is not None:
                doc.update(floor=self.floor)
            if self.warmth is not None:
                last = "; then the last one, its collectors' own" if self.warmups > self.warmth.iterations else ""
                doc.update(warmup=self.warmups, warmup_text=self.warmth.text + last)
            result.update(stopping=doc)
        write_pass_result(self.ctx.out_dir, result)

    def _write_replayed(self) -> None:
        """Layer markers a collector made in close() (a TorchScript model's, from the profiler's module hierarchy)
        appended to the pass's markers, after the iterations they belong to."""
        for marker in self.ctx.replayed:
            self.log(marker)
        if self.ctx.replayed:
            try:
                self.log.flush_to(self.markers_path)
            except DiskFullError as exc:
                self._note_disk_full(exc)

    def _program_outcome(self, status: str, error: str) -> ProgramOutcome | None:
        """A program's pass says what it found (hwprof.session.program_pass_runner); the built-in pipeline nothing."""
        return None
