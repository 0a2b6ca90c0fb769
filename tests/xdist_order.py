"""A pytest plugin for scripts/run_tests.py: the order in which pytest-xdist's workers take the modules, and the
modules one worker must run one after the other.

$HWPROF_TEST_ORDER lists work units in the order they are handed out: a unit is a module or several joined by
"+" (they run on one worker, in that order: the Ray modules, which may not run beside one another, as a node's
ports and processes are the machine's); the modules not listed follow, one unit each, in their collected order.
A module stays on one worker (its module-scoped fixtures stay one set-up, as with --dist loadfile), and xdist
hands the units out in this order as workers free up: the longest first, so that the short ones fill the end.

Why: the first phase ran the Ray modules in a process of their own beside a second that ran everything else; the
two lists were balanced by hand and one process idled at the end whenever a change moved a module's time (the
fresh clone of bba9b2d: 335 s against 368 s). xdist's own `--dist loadgroup` would group the Ray modules, but it
renames each test through an attribute pytest 9 no longer reads: its groups are ignored.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

ORDER_ENV = "HWPROF_TEST_ORDER"


def units(spec: str) -> list[list[str]]:
    """The units of a spec: `a.py+b.py,c.py` -> [["a.py", "b.py"], ["c.py"]]."""
    return [unit.split("+") for unit in spec.split(",") if unit]


def _ranks() -> dict[str, tuple[int, int, str]]:
    """Each listed module's (unit's place, place within the unit, unit's name)."""
    found = units(os.environ.get(ORDER_ENV, ""))
    return {module: (at, within, "+".join(unit)) for at, unit in enumerate(found) for within, module in enumerate(unit)}


class OrderedUnits(LoadScopeScheduling):
    """xdist's scope scheduling with a listed module's unit as its scope (a module's file otherwise), the scopes
    handed out in collection order (pytest_collection_modifyitems below sorts it)."""

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        super().__init__(config, log)
        self.unit = {module: name for module, (_, _, name) in _ranks().items()}

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        return self.unit.get(Path(path).name, path)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> OrderedUnits | None:
    if not os.environ.get(ORDER_ENV):
        return None
    config.option.loadscopereorder = False  # the listed order, not the most tests first
    return OrderedUnits(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = _ranks()
    if not rank:
        return
    last = len(rank) + 1
    items.sort(key=lambda item: rank.get(item.path.name, (last, 0, ""))[:2])  # stable: a module's order kept
