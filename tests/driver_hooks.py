"""The pass's side of the program driver (hwprof.program.driver.PassHooks) for tests of the driver alone: the
schedule it returns, and nothing done at the other moments."""

from __future__ import annotations

from typing import Any


class ScheduleHooks:
    """PassHooks that give the driver `steps` (measured True / clean False) and keep the model it found."""

    def __init__(self, steps: list[tuple[bool, int]]) -> None:
        self.steps = steps
        self.found: Any = None

    def model_found(self, found: Any, sample: tuple[Any, ...]) -> list[tuple[bool, int]]:
        self.found = found
        return self.steps

    def start_measuring(self) -> None: ...
    def set_clean(self, clean: bool) -> None: ...
    def after_measured(self, iteration: int) -> None: ...
    def after_step(self) -> None: ...
    def stop_measuring(self) -> None: ...
    def discard_iteration(self, iteration: int) -> None: ...
