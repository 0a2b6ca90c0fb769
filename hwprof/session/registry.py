"""The collector registry: every module in hwprof.collectors (in its packages too) that defines COLLECTOR.

Adding a collector means adding one package (collectors/<source>/collector.py); nothing else in hwprof names
collectors.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

import hwprof.collectors as collectors_pkg
from hwprof.collectors.base import Collector

_NOT_COLLECTORS = {"base"}


@cache
def all_collectors() -> tuple[type[Collector], ...]:
    """Collector classes ordered by pass, then name."""
    from hwprof.core.config import PASS_ORDER

    found: list[type[Collector]] = []
    prefix = collectors_pkg.__name__ + "."
    # walk_packages also finds the modules of subpackages (collectors/gpu/<source>/collector.py).
    for info in pkgutil.walk_packages(collectors_pkg.__path__, prefix):
        parts = info.name[len(prefix) :].split(".")
        if info.ispkg or any(p.startswith("_") for p in parts) or parts[0] in _NOT_COLLECTORS:
            continue
        module = importlib.import_module(info.name)
        collector = getattr(module, "COLLECTOR", None)
        if collector is not None:
            found.append(collector)
    rank = {name: i for i, name in enumerate(PASS_ORDER)}
    return tuple(sorted(found, key=lambda c: (rank.get(c.pass_name, len(rank)), c.name)))


def by_name() -> dict[str, type[Collector]]:
    return {c.name: c for c in all_collectors()}


def check_names(names: list[str]) -> None:
    """Raise ValueError listing the known collectors when a name is not one of them."""
    known = by_name()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown collector {', '.join(unknown)}; known: {', '.join(sorted(known))}")
