"""One pass over the user's own program (`hwprof collect -- python SCRIPT ...`), in the pass's worker process.

The same PassRunner as the built-in pipeline's (collectors opened before torch, closed whatever happens,
result.json written), but the program drives the loop: it runs in this process (hwprof.program.launch), the
model is found at its calls (hwprof.program.finder), and each call is a warm-up, measured or clean iteration
(hwprof.program.driver). What the pass found and how the program ended is result.json's `program`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hwprof.program.driver import Calls, ProgramDriver
from hwprof.program.finder import AmbiguousModel, Found, ModelFinder
from hwprof.program.launch import ProgramEnd, run_program
from hwprof.program.scopes import class_name
from hwprof.rundir.pass_files import write_model_json
from hwprof.schema.program import ProgramOutcome
from hwprof.session.pass_runner import PassRunner
from hwprof.session.worker_io import progress
from hwprof.session.worker_stop import STOP

ENDED = {
    "stopped": "stopped after the measured calls",
    "returned": "ran to its end",
    "exit": "ran to its end (sys.exit)",
    "failed": "failed",
}


SCRIPTED_LAYERS = (
    "layers of the TorchScript model: spans made from torch.profiler's module hierarchy (with_modules) of each "
    "op in the {pass_name} pass, after it; the profiler is on in those iterations, so their cost is that pass's "
    "paired cost"
)
SCRIPTED_LOST = {
    "layers": "per-layer counters (perf_events, PAPI), energy and FLOPs",
    "kernels": "perf samples per layer",
}
"""What a pass that cannot place a TorchScript model's layer spans loses (by pass)."""


class ProgramPassRunner(PassRunner):
    def __init__(self, run_dir: Path, pass_name: str, names: list[str]) -> None:
        super().__init__(run_dir, pass_name, names)
        assert self.config.program is not None
        self.spec = self.config.program
        self.driver: ProgramDriver | None = None
        self.finder: ModelFinder | None = None
        self.end: ProgramEnd | None = None
        self.notes: list[str] = []
        self._total = self.config.warmup + self.config.iters

    def _build(self) -> str:
        """Nothing is built before the program runs: the finder waits for its calls."""
        import torch

        torch.set_num_threads(self.config.threads)
        progress(phase="build", done=0, total=1)
        self.driver = ProgramDriver(self.bus, self, self.config.warmup, end=self.spec.end)
        self.finder = ModelFinder(on_found=self.driver.adopt, model_path=self.spec.model_path)
        self.driver.on_warmup_end = self.finder.close
        os.register_at_fork(after_in_child=self._in_forked_child)
        return "torch"

    def _measure(self, runtime_name: str) -> None:
        assert self.driver is not None and self.finder is not None
        STOP.bus, STOP.at_boundaries = self.bus, True
        self.finder.install()
        try:
            self.end = run_program(self.spec)
        except AmbiguousModel as exc:
            raise ProgramFailed(str(exc)) from None
        finally:
            self.finder.close()
            self.driver.finish()
            STOP.disarm()
        if self.driver.found is None:
            raise ProgramFailed(self.finder.never_found())
        if not self.end.ok:
            raise ProgramFailed(f"the program {self._how_it_failed()} (its traceback is in this pass's worker.log)")
        measured = self.driver.calls.measured
        if measured < self.config.iters:
            self.notes.append(
                f"the program ended after {self.driver.calls.before + self.driver.calls.total} calls of the model: "
                f"{measured} measured of the {self.config.iters} asked (--iters)"
            )

    def _how_it_failed(self) -> str:
        assert self.end is not None
        if self.end.how == "exit":
            return f"exited with status {self.end.exit_code}"
        return f"raised {self.end.error}"

    # The driver's moments (hwprof.program.driver.PassHooks).

    def model_found(self, found: Found, sample: tuple[Any, ...]) -> list[tuple[bool, int]]:
        from hwprof.program.model import ProgramPipeline, built_model, first_tensor
        from hwprof.program.scopes import layer_scopes
        from hwprof.session.paired import schedule
        from hwprof.workload.layers import layer_table, scripted_layer_table

        assert self.driver is not None
        built = built_model(found)
        pipeline = ProgramPipeline(self.config, self.bus, built, found, first_tensor(sample), self.driver.internal)
        self.ctx.pipeline = pipeline
        depth = self.config.depth
        if found.scripted:
            layers = scripted_layer_table(built.module, depth)
            self.ctx.layer_scopes = layer_scopes(found.module, found.layers_module, depth)
        else:
            layers = layer_table(built.module, pipeline.sample_batch(), depth)
        write_model_json(self.ctx.out_dir, built, pipeline.sample_batch().shape, layers)
        self._wire(layer_markers=not found.scripted)
        note = self._scripted_note() if found.scripted else None
        if note is not None:
            self.notes.append(note)
        iters = self._measured_iterations()
        steps = schedule(iters) if self._pairs("torch") else [(True, i) for i in range(iters)]
        self._total = self.config.warmup + len(steps)
        return steps

    def _scripted_note(self) -> str | None:
        """What this pass gives of a TorchScript model's layers, in one line: their spans from torch.profiler's
        module hierarchy where a collector of the pass reads it, else what the pass cannot give per layer."""
        from hwprof.program.scopes import UNTRACED_FIX

        if any(c.finds_scripted_layers for c in self.collectors if self._ok(c)):
            return SCRIPTED_LAYERS.format(pass_name=self.ctx.pass_name)
        if self.ctx.pass_name == "timing":
            return None  # a clean forward: no layer figures in any run
        lost = SCRIPTED_LOST.get(self.ctx.pass_name, "per-layer figures")
        return (
            f"{lost} of the {self.ctx.pass_name} pass: unavailable for a TorchScript model: its layers run inside "
            f"TorchScript, where no Python code runs at their boundaries (hwprof's layer markers never fire; its "
            f"per-layer times come from torch.profiler's module hierarchy in the trace pass); fix: {UNTRACED_FIX}"
        )

    def start_measuring(self) -> None:
        self.log.flush_to(self.markers_path)
        self._each("start", self.ctx)

    def after_measured(self, iteration: int) -> None:
        self._each("after_iteration", self.ctx, iteration)

    def after_step(self) -> None:
        self.log.flush_to(self.markers_path)
        self._done += 1
        warmup = self.driver is not None and self.driver.calls.measured + self.driver.calls.clean == 0
        progress(phase="warmup" if warmup else "measure", done=self._done, total=max(self._total, self._done))
        STOP.check(self._done, self._total)

    def stop_measuring(self) -> None:
        STOP.disarm()
        self._each("stop", self.ctx)

    def _in_forked_child(self) -> None:
        """A process the program forks (a DataLoader worker) measures nothing: its markers would reach the
        parent's collectors' copies."""
        self.bus.halted = True
        if self.driver is not None:
            self.driver.done = True

    def _program_outcome(self, status: str, error: str) -> ProgramOutcome:
        driver, finder, end = self.driver, self.finder, self.end
        found = driver.found if driver is not None else None
        calls = driver.calls if driver is not None else Calls()
        outcome = ProgramOutcome.of(
            calls=calls.before + calls.total,
            warmup_calls=calls.warmup,
            measured_calls=calls.measured,
            clean_calls=calls.clean,
            other_roots=finder.other_roots() if finder is not None else {},
            ended=self._ended(status, found),
            notes=self.notes,
        )
        if found is not None:
            outcome.update(
                model=found.name,
                model_class=class_name(found.module),
                why=found.why,
                layers_from=found.layers_from,
                scripted=found.scripted,
            )
        if end is not None and end.exit_code is not None:
            outcome.update(exit_code=end.exit_code)
        if end is not None and end.error is not None:
            outcome.update(error=end.error)
        return outcome

    def _ended(self, status: str, found: Found | None) -> str:
        if status == "interrupted":
            return "interrupted"
        if self.end is None:
            return "failed"
        if found is None and self.finder is not None and not self.finder.roots:
            return "called no torch module"
        if self.end.ok and self.driver is not None and self.driver.calls.measured < self.config.iters:
            return "ended before the measured calls"
        return ENDED[self.end.how]


class ProgramFailed(Exception):
    """The program's pass cannot give figures; the message is one line."""
