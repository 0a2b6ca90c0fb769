"""The collector registry: every module in hwprof.collectors (in its packages too) that defines COLLECTOR.

Adding a collector means adding one package (collectors/<source>/collector.py); nothing else in hwprof names
collectors.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hwprof.collectors as collectors_pkg
from hwprof.collectors.base import Collector
from hwprof.core.uservalue import shown

if TYPE_CHECKING:
    from hwprof.collectors.gpu.kineto.attribution import GpuAttribution as GpuAttribution
    from hwprof.collectors.gpu.kineto.trace import GpuTrace as GpuTrace
    from hwprof.collectors.gpu.ncu.csv_report import NcuReport as NcuReport
    from hwprof.collectors.gpu.nvml.series import NvmlSeries as NvmlSeries
    from hwprof.schema.codec import JsonObject
    from hwprof.schema.records import MetricTables
    from hwprof.schema.summaries_gpu import GpuKinetoSummary

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
        raise ValueError(f"unknown collector {', '.join(shown(n) for n in unknown)}; known: {', '.join(sorted(known))}")


@dataclass(frozen=True)
class GpuParsers:
    """The GPU collectors' parsers and writers that `hwprof gpu-import` runs on recorded files (no GPU needed),
    handed out here so that the import, like the session, reaches collector code only through the registry;
    a recording and a live run then give the same tables."""

    load_gpu_trace: Callable[[Path], GpuTrace]
    attribute: Callable[..., GpuAttribution]
    layer_range: re.Pattern[str]
    write_kineto_outputs: Callable[..., Any]
    kineto_run_summary: Callable[..., GpuKinetoSummary]
    load_ncu_csv: Callable[[Path], NcuReport]
    ncu_layer_tables: Callable[[NcuReport | None, NcuReport | None], tuple[MetricTables, dict[str, list[JsonObject]]]]
    """The layers' metric tables, and layer -> its kernels (ncu.kernels.json's rows, read as NcuKernel)."""
    ncu_layer_key: Callable[[int], str]
    nvml_series: type[NvmlSeries]
    nvml_power_average_s: Callable[[str | tuple[int, int]], float]


@cache
def gpu_parsers() -> GpuParsers:
    from hwprof.collectors.gpu.kineto.attribution import attribute
    from hwprof.collectors.gpu.kineto.pass_outputs import run_summary, write_outputs
    from hwprof.collectors.gpu.kineto.trace import LAYER_RANGE, load_gpu_trace
    from hwprof.collectors.gpu.ncu.csv_report import load_ncu_csv
    from hwprof.collectors.gpu.ncu.per_layer import layer_key, layer_tables
    from hwprof.collectors.gpu.nvml.series import NvmlSeries, power_average_s

    return GpuParsers(
        load_gpu_trace=load_gpu_trace,
        attribute=attribute,
        layer_range=LAYER_RANGE,
        write_kineto_outputs=write_outputs,
        kineto_run_summary=run_summary,
        load_ncu_csv=load_ncu_csv,
        ncu_layer_tables=layer_tables,
        ncu_layer_key=layer_key,
        nvml_series=NvmlSeries,
        nvml_power_average_s=power_average_s,
    )
