"""The collectors of one pass, in its worker: every hook of each called through a guard, so that one that raises
is marked failed (the hook and its error, hwprof.session.collector_state), is no longer called and gets close()
still, while the pass and the other collectors go on. The pass runner (hwprof.session.pass_runner) decides when
each hook is called.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hwprof.collectors.base import Collector, CollectorResult, PassContext
from hwprof.core.atomic import DiskFullError
from hwprof.core.config import RunConfig
from hwprof.core.markers import Marker
from hwprof.session.collector_state import CollectorRecord, Failure, mark_pass_end
from hwprof.session.registry import by_name
from hwprof.session.worker_stop import Interrupted

if TYPE_CHECKING:
    from hwprof.core.kernels import SampleRate


class PassCollectors:
    """A pass's collectors and their standing: a failed one's hooks are no longer called."""

    def __init__(self, config: RunConfig, ctx: PassContext, names: list[str]) -> None:
        self.config = config
        self.ctx = ctx
        classes = by_name()
        # Ascending `order` everywhere: counter readers (high order) open last, so threads that
        # other collectors start in open() exist before the counters and stay out of their counts.
        self.collectors: list[Collector] = sorted((classes[n](self.config) for n in names), key=lambda c: c.order)
        self.records = {c.name: CollectorRecord(c) for c in self.collectors}
        self.clean_iteration = False
        """In a clean iteration of a paired pass: no collector gets markers (but those asking for
        clean_markers)."""
        self.disk_full: DiskFullError | None = None
        """The first write that found the disk full: the pass fails with its path."""
        self.wished = 0
        """The most measured iterations a collector of the pass needs at the least (_measured_iterations): a
        stopping rule's floor (hwprof.session.pass_stop)."""
        self.sampling: SampleRate | None = None
        """A sampler's rate where the pass's stopping rule counts its samples per layer as it runs (its wish is the
        plan's bound, not a floor: Collector.sample_rate)."""

    def _fail(self, collector: Collector, stage: str, exc: BaseException) -> Failure:
        self._note_disk_full(exc)
        print(f"collector {collector.name} failed in {stage}: {exc}", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        record = self._record(collector)
        seq = record.failure.seq if record.failure else sum(1 for r in self.records.values() if not r.ok)
        record.failure = Failure(stage, f"{type(exc).__name__}: {exc}", seq)
        return record.failure

    def _record(self, collector: Collector) -> CollectorRecord:
        record = self.records.get(collector.name)
        if record is None:
            record = self.records[collector.name] = CollectorRecord(collector)
        return record

    def _ok(self, collector: Collector) -> bool:
        """The collector has not failed: its hooks are still called."""
        return self._record(collector).ok

    def _note_disk_full(self, exc: BaseException) -> None:
        if isinstance(exc, DiskFullError) and self.disk_full is None:
            self.disk_full = exc

    def _each(self, stage: str, *args: Any) -> None:
        for collector in self.collectors:
            if self._ok(collector):
                self._call(collector, stage, *args)

    def _call(self, collector: Collector, stage: str, *args: Any) -> None:
        try:
            getattr(collector, stage)(*args)
        except (Interrupted, KeyboardInterrupt):
            raise
        except Exception as exc:
            self._fail(collector, stage, exc)

    def _close_failed(self, collector: Collector) -> None:
        """A collector whose hook raised still gets close(), to release what it holds; its failure stands."""
        try:
            collector.close(self.ctx)
        except Exception as exc:
            print(f"collector {collector.name}: close after failure raised {exc!r}", file=sys.stderr)

    def _guarded(self, collector: Collector) -> Callable[[Marker], None]:
        """on_marker, but a collector that raises is marked failed and stops receiving markers. Called at every
        marker (twice per layer per forward): no lookup beyond what it must check."""
        record, on_marker, clean_markers = self._record(collector), collector.on_marker, collector.clean_markers

        def deliver(marker: Marker) -> None:
            if record.failure is not None or (self.clean_iteration and not clean_markers):
                return
            try:
                on_marker(marker)
            except Exception as exc:
                self._fail(collector, "on_marker", exc)

        return deliver

    def _measured_iterations(self) -> int:
        """--iters, or more where a collector of this pass needs more (its wish is bounded by the collector); the
        largest wish is kept in `wished` (a stopping rule's floor: hwprof.session.pass_stop), but a sampler's whose
        samples the rule counts as they come (`sampling`: its wish only bounds the plan)."""
        wishes, floors = [0], [0]
        for collector in self.collectors:
            if not self._ok(collector):
                continue
            try:
                wish = collector.measured_iterations(self.ctx) or 0
                rate = collector.sample_rate(self.ctx)
            except Exception as exc:
                self._fail(collector, "measured_iterations", exc)
                continue
            wishes.append(wish)
            if rate is None:
                floors.append(wish)
            else:
                self.sampling = rate
        self.wished = max(floors)
        cap = self._iteration_cap()
        planned = max(self.config.iters, *wishes)
        return planned if cap is None else min(planned, cap)

    def _iteration_cap(self) -> int | None:
        """The smallest iteration_limit of the pass's live collectors (None: none limits)."""
        limits = [c.iteration_limit(self.ctx) for c in self.collectors if self._ok(c)]
        return min((x for x in limits if x), default=None)

    def _close_each(self, status: str, error: str) -> dict[str, CollectorResult]:
        """Every collector closed, a failed one too (its failure stands); their results, the failed ones first in
        the order they failed, then the others as they closed."""
        failed = sorted((f.seq, name, f) for name, r in self.records.items() if (f := r.failure) is not None)
        results = {name: CollectorResult("failed", reason=f.reason) for _, name, f in failed}
        for collector in self.collectors:
            if collector.name in results:
                self._close_failed(collector)
                continue
            try:
                result = collector.close(self.ctx)
            except Exception as exc:
                results[collector.name] = CollectorResult("failed", reason=self._fail(collector, "close", exc).reason)
                continue
            results[collector.name] = self._final_result(collector, mark_pass_end(result, status, error))
        return results

    def _final_result(self, collector: Collector, result: CollectorResult) -> CollectorResult:
        """A collector's result as the pass records it (a program's pass may say why it measured nothing)."""
        return result
