"""What a program's pass does at the driver's moments (hwprof.program.driver.PassHooks): the model found (model.json,
the collectors prepared, the layer markers on, the schedule of measured and clean calls), each call's markers and
progress, the collectors started and stopped around the measured calls. The program's run itself, and what its end
means for the pass, is hwprof.session.program_pass_runner's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwprof.program.driver import ProgramDriver
from hwprof.program.eager_parts import EagerLayer
from hwprof.program.finder import Found
from hwprof.program.stage_hooks import StageHooks
from hwprof.rundir.pass_files import write_model_json
from hwprof.session.pass_runner import PassRunner
from hwprof.session.program_scripted import eager_parts, scripted_note
from hwprof.session.worker_io import progress
from hwprof.session.worker_stop import STOP

if TYPE_CHECKING:
    from hwprof.workload.layers import LayerRecorder


class ProgramMoments(PassRunner):
    """The pass's side of the driver's moments; the driver calls them from the program's calls of its model."""

    def __init__(self, run_dir: Path, pass_name: str, names: list[str]) -> None:
        super().__init__(run_dir, pass_name, names)
        self.driver: ProgramDriver | None = None
        self.stages: StageHooks | None = None
        self.notes: list[str] = []
        self._total = self.config.warmup + self.config.iters
        self._layers: LayerRecorder | None = None
        """The layer table's hooks, on the model from its first marked call until model.json is written."""
        self._eager: list[EagerLayer] = []
        """A TorchScript model's layers that its eager wrapper runs itself, marked live (model_found)."""

    def model_found(self, found: Found, sample: tuple[Any, ...]) -> list[tuple[bool, int]]:
        from hwprof.program.pipeline import ProgramPipeline, built_model, first_tensor, model_device_sync
        from hwprof.session.paired import schedule
        from hwprof.workload.layers import record_layers, scripted_layer_table
        from hwprof.workload.script_scopes import layer_scopes

        assert self.driver is not None
        self.driver.sync = model_device_sync(found.module, self.config.device)
        if self.stages is not None:
            self.stages.retry(main=True)
        built = built_model(found)
        pipeline = ProgramPipeline(self.config, self.bus, built, found, first_tensor(sample), self.driver.internal)
        self.ctx.pipeline = pipeline
        depth = self.config.depth
        ok = [c for c in self.collectors if self._ok(c)]
        if found.scripted:
            layers = scripted_layer_table(built.module, depth)
            self.ctx.layer_scopes = layer_scopes(found.module, found.layers_module, depth)
            write_model_json(self.ctx.out_dir, built, pipeline.sample_batch().shape, layers)
            self._eager = eager_parts(ok, found, depth, self.notes)
        else:  # shapes recorded in this call, the program's own: no forward of hwprof's own inside it
            self._layers = record_layers(built.module, depth)
        self._wire(layer_markers=not found.scripted or bool(self._eager))
        note = scripted_note(ok, self.ctx.pass_name, self.config) if found.scripted else None
        if note is not None:
            self.notes.append(note)
        iters = self._measured_iterations()
        steps = schedule(iters) if self._pairs("torch") else [(True, i) for i in range(iters)]
        self._total = self.config.warmup + len(steps)
        STOP.at_boundaries = True  # from the next call on, a stop waits for the end of the iteration in flight
        return steps

    def _attach_markers(self) -> Callable[[], None]:
        if not self._eager:
            return super()._attach_markers()
        from hwprof.core.markers import attach_markers

        return attach_markers(self._eager, self.bus)

    def start_measuring(self) -> None:
        self.log.flush_to(self.markers_path)
        self._each("start", self.ctx)

    def after_measured(self, iteration: int) -> None:
        self._each("after_iteration", self.ctx, iteration)

    def after_step(self) -> None:
        self._write_layers()
        self.log.flush_to(self.markers_path)
        self._done += 1
        warmup = self.driver is not None and self.driver.calls.measured + self.driver.calls.clean == 0
        progress(phase="warmup" if warmup else "measure", done=self._done, total=max(self._total, self._done))
        STOP.check(self._done, self._total)

    def stop_measuring(self) -> None:
        STOP.disarm()
        self._each("stop", self.ctx)

    def discard_iteration(self, iteration: int) -> None:
        if self.log.discard_unflushed(iteration):
            self.notes.append(
                "the program ended after its last forward, inside the next iteration: its time from there to its "
                "end (no forward) is not kept as an iteration"
            )

    def _write_layers(self, forward: bool = False) -> None:
        """model.json, once the layer table's hooks saw a forward (the first marked call's), or with one forward
        of hwprof's own of the sample (`forward`: only after the program)."""
        from hwprof.workload.layers import forward_with_hooks

        recorder, pipeline = self._layers, self.ctx.pipeline
        if recorder is None or pipeline is None or not (recorder.seen or forward):
            return
        self._layers = None
        if recorder.seen:
            recorder.remove()
        else:
            forward_with_hooks(pipeline.model, pipeline.sample_batch(), recorder.handles)
        write_model_json(self.ctx.out_dir, pipeline.built, pipeline.sample_batch().shape, recorder.rows)
