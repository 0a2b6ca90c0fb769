"""The parts of `hwprof attach` that need no service: the window's driver (a failure of hwprof's served, the
service's own raised, one thread's calls marked), the marker bus's owner, and the module classes named by py-spy's
forward frames (--no-agent)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import torch

from hwprof.agent.window import WindowDriver
from hwprof.analysis.whole_program import forward_times, module_class
from hwprof.core.markers import Marker, MarkerBus
from hwprof.program.finder import Found
from hwprof.schema.records import Span


class Hooks:
    """The pass's side of the driver's moments, recording them; `fail_setup` makes the set-up raise."""

    def __init__(self, fail_setup: bool = False) -> None:
        self.fail_setup = fail_setup
        self.moments: list[str] = []

    def model_found(self, found: Found, sample: tuple[Any, ...]) -> list[tuple[bool, int]]:
        if self.fail_setup:
            raise OSError(28, "No space left on device")
        self.moments.append("found")
        return [(True, 0), (True, 1)]

    def start_measuring(self) -> None:
        self.moments.append("start")

    def set_clean(self, clean: bool) -> None: ...

    def after_measured(self, iteration: int) -> None:
        self.moments.append(f"measured {iteration}")

    def after_step(self) -> None: ...

    def stop_measuring(self) -> None:
        self.moments.append("stop")

    def discard_iteration(self, iteration: int) -> None: ...


class Flaky(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.raise_next = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.raise_next:
            raise ValueError("the service's own bug")
        return x * 2


def adopted(hooks: Hooks, any_thread: bool = True) -> tuple[WindowDriver, Flaky]:
    model = Flaky()
    driver = WindowDriver(MarkerBus(), hooks, 1, end="detach", per_call=True, any_thread=any_thread)
    found = Found(module=model, name="model", why="test", layers_module=model, layers_from="test", scripted=False)
    driver.adopt(found, (torch.ones(1),))
    return driver, model


def test_a_window_measures_its_schedule_then_gives_the_forward_back() -> None:
    hooks = Hooks()
    driver, model = adopted(hooks)
    outs = [model(torch.ones(1)) for _ in range(3)]  # one warm-up, two measured
    assert all(torch.equal(o, torch.full((1,), 2.0)) for o in outs)
    assert hooks.moments == ["found", "start", "measured 0", "measured 1", "stop"]
    assert driver.done and "forward" not in vars(model)


def test_hwprofs_failure_inside_a_call_serves_the_call_and_ends_the_window() -> None:
    driver, model = adopted(Hooks(fail_setup=True))
    out = model(torch.ones(1))
    assert torch.equal(out, torch.full((1,), 2.0))
    assert driver.bus.halted and "No space left on device" in driver.failure


def test_the_services_own_exception_is_raised_unchanged() -> None:
    driver, model = adopted(Hooks())
    model(torch.ones(1))
    model.raise_next = True
    with pytest.raises(ValueError, match="the service's own bug"):
        model(torch.ones(1))
    assert driver.failure.startswith("the service's call of its model raised ValueError")


def test_a_pinned_window_marks_one_threads_calls() -> None:
    hooks = Hooks()
    driver, model = adopted(hooks, any_thread=False)
    model(torch.ones(1))  # this thread's: the set-up and the warm-up
    other = threading.Thread(target=lambda: model(torch.ones(1)))
    other.start()
    other.join()
    assert driver.calls.total == 1 and sum(driver.calls.other_threads.values()) == 1
    assert driver.bus.owner == threading.get_ident()


def test_a_bus_with_an_owner_drops_other_threads_markers() -> None:
    bus = MarkerBus()
    seen: list[Marker] = []
    bus.subscribe(seen.append, True)
    bus.owner = threading.get_ident()
    other = threading.Thread(target=lambda: bus.emit("layer", "B", "model.0"))
    other.start()
    other.join()
    bus.emit("layer", "B", "model.1")
    assert [m.name for m in seen] == ["model.1"]


def test_module_classes_are_named_by_their_forward_frames() -> None:
    assert module_class("C2f.forward") == "C2f"
    assert module_class("Conv.forward_fuse") == "Conv"
    assert module_class("forward") is None and module_class("BaseModel._predict_once") is None


def test_a_class_inside_its_own_forward_is_counted_once() -> None:
    def span(name: str, start: int, end: int, tid: int = 1) -> Span:
        return Span(name=name, ts_ns=start, dur_ns=end - start, track="py-spy", tid=tid)

    spans = [
        span("BaseModel.forward", 0, 100),
        span("Conv.forward", 10, 40),
        span("Conv.forward", 15, 35),  # a Conv inside a Conv: its time is its parent's already
        span("C2f.forward", 50, 90),
        span("Conv.forward", 60, 70),
        span("BaseModel.forward", 0, 50, tid=2),
    ]
    times, outermost = forward_times(spans)
    assert outermost == 150
    assert times == {"BaseModel": 150, "Conv": 40, "C2f": 40}


def test_a_stopped_agent_leaves_no_thread_and_no_socket_and_starts_again() -> None:
    """stop() ends the agent's thread (a listener closed under accept() alone left it blocked there for good)."""
    import time

    import hwprof.agent

    def agent_threads() -> list[str]:
        return [t.name for t in threading.enumerate() if t.name == "hwprof-agent"]

    for _ in range(2):
        path = hwprof.agent.start()
        assert path.exists() and agent_threads() == ["hwprof-agent"]
        hwprof.agent.stop()
        deadline = time.monotonic() + 5
        while agent_threads() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not agent_threads() and not path.exists()
