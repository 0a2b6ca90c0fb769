"""NVML in the layers pass (`--device cuda`): GPU power, energy (J per inference and per stage from
the total-energy counter), SM and memory utilisation, clocks, memory used and temperature, as counter
tracks and a summary. Unavailable with the reason where NVML (nvidia-ml-py and the driver) is absent.

Stage energy: the energy counter is read at each stage's begin and end marker (one NVML call each,
about the cost of one sample) rather than interpolated from samples, so a 1 ms stage gets its own
figure; NVML's counter resolution is 1 mJ, and how often the driver refreshes it is not documented, so
the figure of a stage of a few ms is meaningful as a mean over many visits only.
"""

from __future__ import annotations

import gzip
import json
import statistics
from typing import TYPE_CHECKING, Any

from hwprof.collectors.base import Capability, Collector, CollectorResult, PassContext

from hwprof.records import MetricTables, metrics_path, records_path, write_records

if TYPE_CHECKING:
    from hwprof.config import RunConfig
    from hwprof.markers import Marker

NAME = "nvml"
FIX = "pip install nvidia-ml-py (hwprof[gpu]) and run where the NVIDIA driver is loaded (nvidia-smi works)"


def device_index(config: RunConfig) -> int:
    return int(config.device.partition(":")[2] or 0)


class NvmlCollector(Collector):
    name = NAME
    title = "NVML GPU power, energy, utilisation, clocks, memory, temperature"
    pass_name = "layers"
    subscribes = True
    order = 35

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self.sampler: Any = None
        self._begin: dict[str, float] = {}
        self.stage_j: dict[str, list[float]] = {}
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

    def on_marker(self, marker: Marker) -> None:
        if not self._measuring or marker.kind != "stage" or marker.warmup:
            return
        energy = self.sampler.nv.nvmlDeviceGetTotalEnergyConsumption(self.sampler.h)
        if marker.phase == "B":
            self._begin[marker.name] = energy
        elif marker.name in self._begin:
            self.stage_j.setdefault(marker.name, []).append((energy - self._begin.pop(marker.name)) / 1e3)

    def stop(self, ctx: PassContext) -> None:
        if self._measuring:
            self._measuring = False
            self.window.append(self.sampler.read_now()[8])
            self.sampler.stop()

    def close(self, ctx: PassContext) -> CollectorResult:
        from hwprof.collectors.gpu.nvml.sampler import COLUMNS
        from hwprof.collectors.gpu.nvml.samples import NvmlSeries

        self.stop(ctx)
        if self.sampler is None or len(self.sampler.samples) < 2:
            return CollectorResult("failed", reason="NVML was not sampled over the measured iterations")
        series = NvmlSeries(COLUMNS, self.sampler.samples)
        raw = ctx.out_dir / f"{NAME}.samples.json.gz"
        with gzip.open(raw, "wt") as out:
            json.dump(series.to_dict(), out)
        rec = records_path(ctx.out_dir, NAME)
        write_records(rec, series.counter_samples())
        tables = MetricTables(
            stages={name: {"energy_j": statistics.fmean(v)} for name, v in self.stage_j.items()},
            units={"energy_j": "J"},
            methods={"energy_j": "NVML total-energy counter read at the stage's begin and end markers, mean per visit"},
        )
        met = metrics_path(ctx.out_dir, NAME)
        tables.save(met)
        iterations = max((len(v) for v in self.stage_j.values()), default=0)
        total_j = (self.window[1] - self.window[0]) / 1e3
        t = series.times
        summary: dict[str, Any] = {
            "samples": len(series.samples),
            "interval_ms": self.config.interval_ms,
            "energy_j": total_j,
            "j_per_iteration": total_j / iterations if iterations else None,
            "stage_energy_j": {k: v["energy_j"] for k, v in tables.stages.items()},
            "means": series.window_means(t[0], t[-1]),
            "energy_method": "NVML total-energy counter (mJ)",
        }
        status = "partial" if self.sampler.error else "ok"
        return CollectorResult(
            status,
            reason=self.sampler.error,
            fix=FIX if self.sampler.error else "",
            summary=summary,
            artifacts=[ctx.relpath(raw), ctx.relpath(rec), ctx.relpath(met)],
        )


COLLECTOR = NvmlCollector
