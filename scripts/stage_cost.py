"""What `with hwprof.stage("name"):` and a wrapped known function cost, with hwprof running and without.

Each figure is the median over repeats of (loop with the stage - the same loop with an empty body) per
iteration, in ns of this thread's CPU time (time.thread_time_ns: other work on a busy host does not count in it,
though it still disturbs the caches):

- without hwprof: the gate has no sink (a program run by plain `python`);
- hwprof running, not marked: the driver is the sink but the stage is outside an iteration (before the model's
  first call, or after the measured ones): the driver's depth bookkeeping alone;
- hwprof running, marked: inside a measured iteration, a begin and an end marker each, through the pass's
  marker bus to its marker log (the floor of every pass; a pass's collectors add their own work per marker);
- the same three for a known function hwprof wraps (a stand-in for cv2.imread that does nothing).

    python scripts/stage_cost.py [--calls 5000] [--repeats 21]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from types import ModuleType

import hwprof
from hwprof import stage_api
from hwprof.core.markers import MarkerBus, MarkerLog
from hwprof.core.program_spec import StageTarget
from hwprof.program.driver import ProgramDriver
from hwprof.program.finder import Found
from hwprof.program.stage_hooks import StageHooks


class _Pass:
    """The pass's side of the driver: nothing to do (the schedule is long enough never to end here)."""

    def model_found(self, found: object, sample: object) -> list[tuple[bool, int]]:
        return [(True, i) for i in range(10)]

    def start_measuring(self) -> None: ...
    def set_clean(self, clean: bool) -> None: ...
    def after_measured(self, iteration: int) -> None: ...
    def after_step(self) -> None: ...
    def stop_measuring(self) -> None: ...


def _per_call_ns(body: Callable[[int], None], calls: int, repeats: int, log: MarkerLog | None = None) -> float:
    """`log`: emptied before each repeat, as a pass's log holds a few thousand markers, not millions (the
    garbage collector's passes over millions of live markers would be counted as the stage's cost)."""

    def empty(n: int) -> None:
        for _ in range(n):
            pass

    out = []
    for _ in range(repeats):
        if log is not None:
            log.markers.clear()
        t0 = time.thread_time_ns()
        body(calls)
        t1 = time.thread_time_ns()
        empty(calls)
        t2 = time.thread_time_ns()
        out.append(((t1 - t0) - (t2 - t1)) / calls)
    return statistics.median(out)


def _with_stage(n: int) -> None:
    for _ in range(n):
        with hwprof.stage("load"):
            pass


class _Model:
    """A stand-in for the program's model: the driver wraps its forward as it wraps a torch module's."""

    def forward(self, x: object) -> object:
        return x

    def __call__(self, x: object) -> object:
        return self.forward(x)


def _open_iteration(driver: ProgramDriver) -> None:
    """The driver as it is between two measured forwards: the model found, its warm-up call done, iteration 0
    open on this thread."""
    model = _Model()
    driver.adopt(Found(model, "model", "stand-in", model, "children", scripted=False), ())
    model(None)
    assert driver.calls.warmup == 1 and not driver.done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5_000)
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()

    fake = ModuleType("fake_cv2")
    fake.imread = original = lambda path: None  # type: ignore[attr-defined]
    sys.modules["fake_cv2"] = fake
    hooks = StageHooks([StageTarget("load", "fake_cv2", "imread")])
    hooks.install()

    def with_wrapper(n: int) -> None:
        imread = fake.imread  # type: ignore[attr-defined]
        for _ in range(n):
            imread("x")

    def plain_call(n: int) -> None:
        for _ in range(n):
            original("x")

    bus, log = MarkerBus(), MarkerLog()
    bus.keep_spans(log)
    driver = ProgramDriver(bus, _Pass(), warmup=1)
    call = _per_call_ns(plain_call, args.calls, args.repeats)

    def row(name: str) -> tuple[str, float, float]:
        stage_ns = _per_call_ns(_with_stage, args.calls, args.repeats, log)
        return name, stage_ns, _per_call_ns(with_wrapper, args.calls, args.repeats, log) - call

    assert stage_api.current_sink() is None
    rows = [row("without hwprof")]
    stage_api.set_sink(driver.stage_sink)
    try:
        rows.append(row("hwprof running, not marked"))
        _open_iteration(driver)
        rows.append(row("hwprof running, marked"))
    finally:
        stage_api.set_sink(None)
        hooks.close()
    markers = sum(1 for m in log.markers if m.kind == "stage")  # those of the last repeat
    print(f"python {sys.version.split()[0]}, {args.calls:,} calls x {args.repeats} repeats, median per call")
    print(f"{'':28} {'with hwprof.stage':>18} {'wrapped function':>18}")
    for name, stage_ns, wrapped_ns in rows:
        print(f"{name:28} {stage_ns:>15.0f} ns {wrapped_ns:>15.0f} ns")
    print(f"(a plain call of the unwrapped function: {call:.0f} ns; stage markers in the last repeat: {markers:,})")


if __name__ == "__main__":
    main()
