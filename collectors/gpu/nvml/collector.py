"""NVML in the layers pass (`--device cuda`): GPU power, energy (J per inference and per stage from
the total-energy counter), SM and memory utilisation, clocks, memory used and temperature, as counter
tracks and a summary. Unavailable with the reason where NVML (nvidia-ml-py and the driver) is absent.

Energy per stage and per iteration: the stage and iteration markers give the windows, those of the
pass's clean iterations where it has them (no layer hooks, no other collector: only this sampler,
so the figure is the timing pass's pipeline; live on an H100 a measured iteration of the layers pass
took 45-75 ms against 11 ms clean, most of it collectors' work at the stage markers), else the
measured ones; the total-energy counter sampled beside them, interpolated between its updates
(samples.py: the driver refreshes it only every ~100 ms, so read at a 1 ms stage's markers it says 0 J
for most visits), gives each window's energy. Figures are means per visit and labelled estimates.
"""

from __future__ import annotations

import gzip
import json
from typing import TYPE_CHECKING, Any, NamedTuple

from hwprof.collectors.base import Capability, Collector, CollectorResult, PassContext

from hwprof.core.atomic import atomic_path
from hwprof.schema.records import MetricTables, metrics_path, records_path, write_records
from hwprof.schema.summaries_gpu import NvmlSummary

if TYPE_CHECKING:
    from hwprof.core.config import RunConfig
    from hwprof.core.markers import Marker

NAME = "nvml"
FIX = (
    "pip install -c constraints.txt '.[gpu]' in hwprof's checkout (nvidia-ml-py) and run where the NVIDIA driver is "
    "loaded (nvidia-smi works)"
)


class Visit(NamedTuple):
    """One stage or iteration after the warm-up, between its begin and end markers."""

    kind: str
    name: str
    begin_ns: int
    end_ns: int
    clean: bool


def device_index(config: RunConfig) -> int:
    return int(config.device.partition(":")[2] or 0)


class NvmlCollector(Collector):
    name = NAME
    needs_cuda = True
    title = "NVML GPU power, energy, utilisation, clocks, memory, temperature"
    pass_name = "layers"
    subscribes = True
    order = 35
    clean_markers = True

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self.sampler: Any = None
        self._begin: dict[tuple[str, str], int] = {}
        self.visits: list[Visit] = []
        self.window: list[float] = []
        self._measuring = False

    @classmethod
    def probe(cls, config: RunConfig) -> Capability:
        if config.device == "cpu":
            return Capability.unavailable("the run is on the CPU (--device cpu)", "hwprof collect --device cuda")
        try:
            from hwprof.collectors.gpu.nvml.sampler import open_device, read_sample

            nv, h = open_device(device_index(config))
            read_sample(nv, h)
        except Exception as exc:
            return Capability.unavailable(f"NVML cannot be read ({type(exc).__name__}: {exc})", FIX)
        return Capability.ok()

    def start(self, ctx: PassContext) -> None:
        from hwprof.collectors.gpu.nvml.sampler import NvmlSampler

        self.sampler = NvmlSampler(device_index(self.config), self.config.interval_ms / 1e3)
        self.window = [self.sampler.read_now()[8]]
        self.sampler.start()
        self._measuring = True

    def wants_layer_markers(self) -> bool:
        return False

    def on_marker(self, marker: Marker) -> None:
        if not self._measuring or marker.kind == "layer" or marker.warmup:
            return
        key = (marker.kind, marker.name)
        if marker.phase == "B":
            self._begin[key] = marker.t_ns
        elif key in self._begin:
            self.visits.append(Visit(marker.kind, marker.name, self._begin.pop(key), marker.t_ns, marker.clean))

    def stop(self, ctx: PassContext) -> None:
        if self._measuring:
            self._measuring = False
            self.window.append(self.sampler.read_now()[8])
            self.sampler.stop()

    def close(self, ctx: PassContext) -> CollectorResult:
        from hwprof.collectors.gpu.nvml.sampler import COLUMNS
        from hwprof.collectors.gpu.nvml.series import NvmlSeries, power_average_s

        self.stop(ctx)
        if self.sampler is None or len(self.sampler.samples) < 2:
            return CollectorResult("failed", reason="NVML was not sampled over the measured iterations")
        series = NvmlSeries(COLUMNS, self.sampler.samples, power_average_s(self.sampler.compute_capability()))
        raw = ctx.out_dir / f"{NAME}.samples.json.gz"
        with atomic_path(raw) as tmp, gzip.open(tmp, "wt") as out:
            json.dump(series.to_dict(), out)
        rec = records_path(ctx.out_dir, NAME)
        write_records(rec, series.counter_samples())
        clean = any(v.clean for v in self.visits)
        used = [v for v in self.visits if v.clean == clean]
        stages = series.stage_energy([(v.name, v.begin_ns, v.end_ns) for v in used if v.kind == "stage"])
        iterations = series.stage_energy([(v.kind, v.begin_ns, v.end_ns) for v in used if v.kind == "iteration"])
        count = sum(1 for v in used if v.kind == "iteration")
        which = "clean" if clean else "measured"
        method = f"{series.energy_method()}; mean per visit over the pass's {which} iterations"
        tables = MetricTables(
            stages={name: {"energy_j": v["energy_j"], "power_w": v["power_w"]} for name, v in stages.items()},
            units={"energy_j": "J", "power_w": "W"},
            methods={"energy_j": method},
        )
        met = metrics_path(ctx.out_dir, NAME)
        tables.save(met)
        t = series.times
        per_iteration = iterations.get("iteration", {})
        summary = NvmlSummary.of(
            samples=len(series.samples),
            interval_ms=self.config.interval_ms,
            energy_j=(self.window[1] - self.window[0]) / 1e3,
            window_s=(t[-1] - t[0]) / 1e9,
            counter_update_ms=series.update_period_ms(),
            j_per_iteration=per_iteration.get("energy_j"),
            iterations_with_energy=f"{per_iteration.get('visits', 0)} of {count} {which}",
            stage_energy_j={k: v["energy_j"] for k, v in stages.items()},
            stage_visits={k: v["visits"] for k, v in stages.items()},
            means=series.window_means(t[0], t[-1]),
            energy_method=method,
        )
        if per_iteration.get("energy_j") is None:
            summary.energy_unavailable = (
                f"no {which} iteration lies between two updates of the NVML energy counter "
                f"(it changed {len(series.counter_updates())} times): collect with more --iters"
            )
        status = "partial" if self.sampler.error else "ok"
        return CollectorResult(
            status,
            reason=self.sampler.error,
            fix=FIX if self.sampler.error else "",
            summary=summary,
            artifacts=[ctx.relpath(raw), ctx.relpath(rec), ctx.relpath(met)],
        )


COLLECTOR = NvmlCollector
