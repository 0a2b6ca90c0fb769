"""The trace's slice arguments: a layer slice's (the layer table joined with every per-layer metric) and a
stage slice's (the collectors' per-stage metrics), with their units in the argument names."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from hwprof.analysis.layers.rows import layer_rows
from hwprof.rundir.reader import RunData
from hwprof.schema.records import MetricTables
from hwprof.trace.model import SliceArgs, arg_group


def _with_unit(key: str, unit: str | None) -> str:
    """Perfetto rewrites "." and "[]" in argument names; parentheses survive."""
    return f"{key} ({unit})" if unit else key


def _scalar(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def layer_arguments(run: RunData) -> tuple[dict[str, SliceArgs], dict[str, str]]:
    """qualified layer name -> slice args (the layer table joined with every per-layer metric),
    and -> its label ("7 Conv"). Metrics of collectors other than flops nest under the collector."""
    tables = run.metrics()
    units: dict[str, str] = {}
    for collector, t in tables.items():
        for metric, unit in t.units.items():
            units[metric if collector == "flops" else f"{collector}.{metric}"] = unit
    args: dict[str, SliceArgs] = {}
    labels: dict[str, str] = {}
    info_by_name = {row.name: row for row in run.model_file.layers}
    for row in layer_rows(run):
        name = row.name
        info = info_by_name.get(name)
        if info:
            labels[name] = info.label
        out: SliceArgs = {"qualified_name": name}
        for key, value in row.columns():
            value = _scalar(value)
            if key == "name" or value is None or value == "":
                continue
            if key == "time_ms":
                out["median self time, layers pass (ms)"] = value
            elif "." in key:
                collector, metric = key.split(".", 1)
                arg_group(out, collector)[_with_unit(metric, units.get(key))] = value
            else:
                out[_with_unit(key, units.get(key))] = value
        args[name] = out
    return args, labels


def stage_arguments(tables: dict[str, MetricTables]) -> dict[str, SliceArgs]:
    """stage -> {collector: {metric (unit): value}}."""
    out: dict[str, SliceArgs] = defaultdict(dict)
    for collector, t in sorted(tables.items()):
        for stage, metrics in t.stages.items():
            for metric, value in metrics.items():
                v = _scalar(value)
                if v is not None:
                    arg_group(out[stage], collector)[_with_unit(metric, t.units.get(metric))] = v
    return dict(out)
