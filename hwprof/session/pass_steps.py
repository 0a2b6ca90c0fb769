"""A pass's measured (and, paired, clean) iterations, run a unit at a time, and when they stop: the timing pass's
stopping rule (hwprof.session.timing_stop), a paired pass's (hwprof.session.pass_stop: its clean iterations end
once its cost is resolved), its share of --budget (hwprof.session.budget), and the ABBA blocks added while its cost
is not resolved (hwprof.session.paired.extend). The runner (hwprof.session.pass_runner) builds the model, warms it
up and gives each step (`_step`)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from hwprof.core.markers import MarkerBus, MarkerLog
from hwprof.core.spans import LiveSpans
from hwprof.schema.pass_files import PairedInfo
from hwprof.session.budget import out_of_time, pass_deadline
from hwprof.session.pass_collectors import PassCollectors
from hwprof.session.pass_stop import PassStopping
from hwprof.session.timing_stop import Stopping
from hwprof.session.worker_io import progress

if TYPE_CHECKING:
    from hwprof.analysis.paired_cost import PassCostFigure
    from hwprof.core.kernels import SampleRate


class PassSteps(PassCollectors):
    """The stepping half of a pass's runner: `_run_steps` and what decides where it ends."""

    log: MarkerLog
    bus: MarkerBus
    paired: PairedInfo | None
    sampling: SampleRate | None
    _remove_hooks: Callable[[], None] | None
    _done: int
    warmups: int

    def init_steps(self) -> None:
        self.clean_until: int | None = None
        """Measured iterations when the clean ones ended, the pass's cost resolved (pass_stop); None: they did not."""
        self.floor: int | None = None
        """The measured iterations its stopping rule asks for before it may stop (StoppingDoc.floor); None: no rule."""
        self.deadline = pass_deadline()
        """When the pass's share of --budget ends (time.monotonic(); hwprof.session.budget), None without one."""
        self.stopping: Stopping | PassStopping | None = None
        """The pass's stopping rule's last verdict, where it applies (hwprof.session.timing_stop, pass_stop)."""
        self.live = LiveSpans(self.log.markers)
        """The pass's spans so far, paired as its markers come: what its rule and its cost read after each unit."""

    @property
    def _least_steps(self) -> int:
        """Steps (measured and clean iterations) before the pass's stopping rule is first asked: its floor, with as
        many clean iterations in a paired pass; what its progress bar expects, a block at a time after that."""
        if self.floor is None:
            return 0
        return self.floor * (2 if self.paired is not None else 1)

    def _step(self, measured: bool, i: int, total: int) -> None:
        raise NotImplementedError  # the runner's: one measured or clean iteration

    def _run_steps(self, steps: list[tuple[bool, int]], planned: int, total: int) -> bool:
        """The measured (and clean) iterations, a unit at a time (an ABBA block, or one iteration of a pass that is
        not paired), until the pass's stopping rule is met, its plan ends, or its share of --budget does (True).
        A paired pass's clean iterations end once its cost is resolved, with --iters too: they measure the cost
        alone, and the measured iterations its other figures still need run without them (yolov8n at 256 with
        --iters 3: the kernels pass's sampling plan, 190 measured iterations, ran 190 clean ones beside them)."""
        rule = self._stop_rule(planned)  # after the warm-up, where a counter rotation is planned
        deadline = self.deadline if self.paired is not None or self.ctx.pass_name == "timing" else None
        size = 4 if self.paired is not None else 1
        units = [steps[k : k + size] for k in range(0, len(steps), size)]
        expected = self.warmups + (self._least_steps if rule is not None else len(steps))
        measured, k, unit_start, cost = 0, 0, time.monotonic(), None
        while k < len(units):
            for on, i in units[k]:
                if self._done >= expected:  # the rule's floor passed unresolved: the bar expects the next unit
                    expected = min(self._done + len(units[k]), total)
                self._step(on, i, expected)
                measured += on
            k += 1
            if self.paired is not None and self.clean_until is None:
                cost = self._cost()  # once per unit, until the clean iterations end (then it stays as it is)
            if rule is not None and rule(measured, cost):
                progress(phase="measure", done=self._done, total=self._done)  # the bar ends full
                return False
            if cost is not None and cost.resolved and self.clean_until is None:
                self.clean_until = measured  # the rest measured only, two at a time (whole "blocks" for the rule)
                rest = [(True, i) for unit in units[k:] for on, i in unit if on]
                units = units[:k] + [rest[j : j + 2] for j in range(0, len(rest), 2)]
                expected = self._done + max(self._least_steps // 2 - measured, 0)
            if k < len(units):
                now = time.monotonic()
                if out_of_time(deadline, now - unit_start, now):
                    self._out_of_budget(planned)
                    return True
                unit_start = now
        return False

    def _stop_rule(self, planned: int) -> Callable[[int, PassCostFigure | None], bool] | None:
        """Whether to stop after a unit that brought the measured iterations to n (a paired pass: with its cost
        so far), where the pass stops when its figures are resolved (no --iters); None where it runs its plan."""
        if not self.config.extra.get("timing_resolve"):
            return None
        if self.ctx.pass_name == "timing":
            from hwprof.session.timing_stop import MIN_ITERATIONS

            self.floor = min(MIN_ITERATIONS, planned)
            return lambda measured, cost: self._timing_resolved()
        if self.paired is None:
            return None
        from hwprof.session.pass_stop import floor

        least = self.floor = floor(max([self.wished, *self._fewest()]), planned)
        # asked after whole blocks, and at the plan's end where an odd plan ends inside one (Scalene's plan at
        # yolov8n 64, 169 iterations: never asked, its plan's spread past use went on to 36 more blocks)
        return lambda measured, cost: (
            measured >= least and (measured % 2 == 0 or measured >= planned) and self._paired_ends(planned, cost)
        )

    def _timing_resolved(self) -> bool:
        """The timing pass's stopping rule (hwprof.session.timing_stop) on its measured iterations so far; what it
        found is kept for result.json either way."""
        from hwprof.core.spans import durations_ms
        from hwprof.session.timing_stop import check

        spans = self.live.update().measured
        forwards = durations_ms(spans, "stage").get("forward", [])
        iterations = durations_ms(spans, "iteration").get("iteration", [])
        self.stopping = check(forwards, iterations)
        return self.stopping.resolved

    def _cost(self) -> PassCostFigure | None:
        """The pass's paired cost on its iterations so far (hwprof.analysis.paired_cost)."""
        from hwprof.analysis.paired_cost import paired_cost

        live = self.live.update()
        shapes = (self.bus.inputs.measured, self.bus.inputs.clean)
        return paired_cost(dict(live.forward_ms), dict(live.clean_forward_ms), shapes)

    def _paired_ends(self, planned: int, cost: PassCostFigure | None = None) -> bool:
        """A paired pass's stopping rule (hwprof.session.pass_stop) on its blocks so far (`cost`: their paired cost,
        where the caller has it): whether the pass stops (resolved, or its cost's spread past use); its verdict is
        kept for result.json either way."""
        from hwprof.session.pass_stop import check

        layers = self.ctx.pass_name == "layers" and self._remove_hooks is not None
        cost = cost if cost is not None else self._cost()
        self.stopping = check(self.live.update(), cost, planned, layers, self.clean_until, self.sampling)
        return self.stopping.ends

    def _fewest(self) -> list[int]:
        """What the pass's live collectors need at the least (Collector.fewest_iterations), after the warm-up."""
        out = []
        for collector in (c for c in self.collectors if self._ok(c)):
            try:
                out.append(collector.fewest_iterations(self.ctx) or 0)
            except Exception as exc:
                self._fail(collector, "fewest_iterations", exc)
        return out

    def _out_of_budget(self, planned: int) -> None:
        """The pass's share of --budget ran out: what its rule says of its figures so far, marked as the budget's
        stop (a pass without a rule of its own: a paired pass's, whose cost the report prints)."""
        import dataclasses

        progress(phase="measure", done=self._done, total=self._done)  # the bar ends full
        if self.ctx.pass_name == "timing":
            self._timing_resolved()
        elif self.paired is not None:
            self._paired_ends(planned)
        if self.stopping is not None:
            self.stopping = dataclasses.replace(self.stopping, budget=True)
        print(f"budget: {self.stopping.text if self.stopping else 'the pass stopped at its share'}", file=sys.stderr)

    def _extend(self, measured: int, planned_s: float) -> None:
        """More ABBA blocks while the planned ones do not resolve the pass's cost (hwprof.session.paired.extend)."""
        from hwprof.session.paired import extend

        planned_done = self._done
        _, extension = extend(
            self._cost,
            lambda on, i: self._step(on, i, self._done + 4),
            measured,
            planned_s,
            self.config,
            self._iteration_cap(),
            deadline=self.deadline,
        )
        assert self.paired is not None
        if self._done > planned_done:  # blocks were added: the bar ends full
            progress(phase="measure", done=self._done, total=self._done)
        if extension is not None:
            self.paired.update(extension=extension.record())
            print(f"paired: {extension.text}", file=sys.stderr)
