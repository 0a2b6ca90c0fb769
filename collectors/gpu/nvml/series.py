"""NVML samples as counter tracks, and energy over a window (per inference, per stage).

The sample format is the recordings' `nvml_samples.json.gz`: {"columns": [...], "samples": [[...], ...]}
with t_mono_ns (CLOCK_MONOTONIC ns), power_mw, util_gpu, util_mem (%), sm_mhz, mem_mhz, mem_used (B),
temp_c, and, from the live sampler, energy_mj (nvmlDeviceGetTotalEnergyConsumption, mJ since the
driver loaded). The driver refreshes that counter only every ~100 ms (98 ms median live on an H100, in
steps of ~13 J), so read at a stage's markers it says 0 J for most visits of a 1 ms stage. Energy over
a window is therefore the counter interpolated linearly between the instants it changed (power taken
as constant between two updates): exact over whole update periods, an estimate inside one, and
labelled so. A window that does not lie between two updates has no figure. Where a series has no
energy column (the H100 recording), it is the integral of the sampled power (trapezoids), also an
estimate, corrected for how the driver averages power (below).

nvmlDeviceGetPowerUsage is instantaneous up to GA100 but, on Ampere GA10x and newer (compute
capability 8.6 and up: Ada, Hopper, Blackwell), "power averaged over 1 sec interval" (NVML reference).
A trailing 1 s mean lags every change of load by up to a second: on the H100 recording, yolov7 fp32's
150-inference window (1.2 s, starting 0.15 s after the load) shows the reading climbing from 151 to
223 W over its first 0.85 s and decaying for 0.9 s after it, so the plain integral of the readings
gives 1.579 J per inference where the total-energy counter, read before and after the window, gives
1.946 J (19% low). With P(t) the mean of the true power p over [t - T, t], the integral of P over
[t0, t1] weighs p before t0 in and p before t1 out, each on a triangle T wide; taking those triangle
means as the plain means P(t0) and P(t1) gives the first-order correction
    E[t0, t1] ~= integral of P over [t0, t1] + T/2 * (P(t1) - P(t0)),
which brings yolov7 fp32 to 1.82 J (0.94 of the counter) and all 16 recorded windows to a mean ratio
of 0.99 (sd 0.04). The counter figure is itself read once at each end of the window and moves in
steps of one update (~100 ms of power), i.e. +-8% of a 1.2 s window at 243 W.

NVML's utilisation is the share of its own sample period (1/6 s to 1 s, by product) in which a kernel
ran: coarse, and not the SM occupancy.
"""

from __future__ import annotations

import bisect
import gzip
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hwprof.schema.records import CounterSample

TRACKS: dict[str, tuple[str, str, float]] = {
    "power_mw": ("GPU power (W)", "W", 1e-3),
    "util_gpu": ("GPU utilisation (%)", "%", 1.0),
    "util_mem": ("GPU memory utilisation (%)", "%", 1.0),
    "sm_mhz": ("GPU SM clock (MHz)", "MHz", 1.0),
    "mem_mhz": ("GPU memory clock (MHz)", "MHz", 1.0),
    "mem_used": ("GPU memory used (bytes)", "B", 1.0),
    "temp_c": ("GPU temperature (C)", "C", 1.0),
}
COUNTER_METHOD = (
    "estimate: NVML total-energy counter (nvmlDeviceGetTotalEnergyConsumption) interpolated linearly "
    "between its updates (every {period:.0f} ms here: power taken as constant within each)"
)
POWER_METHOD = "estimate: integral of NVML power samples (trapezoids) over the window; no energy counter in the series"
AVERAGED_POWER_METHOD = (
    "estimate: integral of NVML power samples (trapezoids) over the window, corrected for the driver's "
    "{avg:g} s trailing power average (+ {avg:g}/2 s x (P(end) - P(start))); no energy counter in the series"
)
POWER_AVERAGE_S = 1.0
"""NVML's averaging period of nvmlDeviceGetPowerUsage on Ampere (except GA100) and newer GPUs."""


def power_average_s(compute_capability: str | tuple[int, int]) -> float:
    """Seconds over which nvmlDeviceGetPowerUsage averages on a GPU of this compute capability: 1 s from
    8.6 (GA10x) up, 0 (instantaneous) for GA100 (8.0) and older."""
    if isinstance(compute_capability, str):
        major, _, minor = compute_capability.partition(".")
        compute_capability = (int(major), int(minor or 0))
    return POWER_AVERAGE_S if tuple(compute_capability) >= (8, 6) else 0.0


@dataclass
class NvmlSeries:
    columns: list[str]
    samples: list[list[float]]
    power_average_s: float = 0.0
    """How long a span each power reading averages (power_average_s()); 0: instantaneous readings."""

    @classmethod
    def load(cls, path: Path, power_average: float | None = None) -> NvmlSeries:
        """The series in `path`; `power_average` (s) where the file does not say how its power was averaged."""
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as handle:
            data = json.load(handle)
        average = data.get("power_average_s", power_average or 0.0)
        return cls(list(data["columns"]), sorted(data["samples"], key=lambda s: s[0]), float(average))

    def to_dict(self) -> dict[str, Any]:
        return {"columns": self.columns, "samples": self.samples, "power_average_s": self.power_average_s}

    def column(self, name: str) -> list[float]:
        k = self.columns.index(name)
        return [s[k] for s in self.samples]

    @property
    def times(self) -> list[int]:
        return [int(s[0]) for s in self.samples]

    def counter_samples(self) -> list[CounterSample]:
        out: list[CounterSample] = []
        for key, (track, unit, scale) in TRACKS.items():
            if key in self.columns:
                k = self.columns.index(key)
                out.extend(CounterSample(track, int(s[0]), float(s[k]) * scale, unit) for s in self.samples)
        return out

    def counter_updates(self) -> list[tuple[float, float]]:
        """(instant ns, counter mJ) where the energy counter changed: the midpoint between the sample
        that still had the old value and the first with the new one (off by half a sample interval
        at most). Empty where the series has no energy column."""
        if "energy_mj" not in self.columns:
            return []
        e, t = self.column("energy_mj"), self.times
        return [((t[i - 1] + t[i]) / 2, e[i]) for i in range(1, len(e)) if e[i] != e[i - 1]]

    def update_period_ms(self) -> float | None:
        """Median time between two updates of the energy counter."""
        return _median_gap_ms(self.counter_updates())

    def energy_method(self) -> str:
        """How energy_j obtains its figures from this series."""
        return _counter_method(self.counter_updates()) if "energy_mj" in self.columns else self._power_method()

    def _power_method(self) -> str:
        return AVERAGED_POWER_METHOD.format(avg=self.power_average_s) if self.power_average_s else POWER_METHOD

    def energy_j(self, begin_ns: int, end_ns: int) -> tuple[float, str]:
        """Energy between two CLOCK_MONOTONIC instants, and how it was obtained; ValueError where the
        window is not covered (no samples, or outside the counter's first and last update)."""
        return self._energy_j(begin_ns, end_ns, self.counter_updates())

    def _energy_j(self, begin_ns: int, end_ns: int, updates: list[tuple[float, float]]) -> tuple[float, str]:
        """energy_j with the counter's updates found once by the caller (one scan for many windows)."""
        if not self.samples or end_ns <= begin_ns:
            raise ValueError("no NVML samples over the window")
        if "energy_mj" in self.columns:
            if len(updates) < 2 or not updates[0][0] <= begin_ns < end_ns <= updates[-1][0]:
                raise ValueError("the window is not between two updates of the NVML energy counter")
            instants, mj = [u[0] for u in updates], [u[1] for u in updates]
            joules = (_linear(instants, mj, end_ns) - _linear(instants, mj, begin_ns)) / 1e3
            return joules, _counter_method(updates)
        power = self.column("power_mw")
        times = self.times
        pts: list[tuple[float, float]] = [(begin_ns, _linear(times, power, begin_ns))]
        pts += [(t, p) for t, p in zip(times, power, strict=True) if begin_ns < t < end_ns]
        pts.append((end_ns, _linear(times, power, end_ns)))
        joules = sum((t1 - t0) / 1e9 * (p0 + p1) / 2 / 1e3 for (t0, p0), (t1, p1) in itertools.pairwise(pts))
        # readings that average the last T seconds weigh the power before the window in and its end out
        joules += self.power_average_s / 2 * (pts[-1][1] - pts[0][1]) / 1e3
        return joules, self._power_method()

    def stage_energy(self, visits: list[tuple[str, int, int]]) -> dict[str, dict[str, float]]:
        """Mean energy (J), power (W) and the visits used per stage from (stage, begin_ns, end_ns)
        visits, in the order the stages first appear; a visit the series does not cover is left out
        (a stage none of whose visits is covered is absent)."""
        updates = self.counter_updates()
        by: dict[str, list[tuple[float, int]]] = {}
        for name, b, e in visits:
            rows = by.setdefault(name, [])
            try:
                joules, _ = self._energy_j(b, e, updates)
            except ValueError:
                continue
            rows.append((joules, e - b))
        return {
            name: {
                "energy_j": sum(j for j, _ in rows) / len(rows),
                "power_w": sum(j for j, _ in rows) / (sum(d for _, d in rows) / 1e9),
                "visits": len(rows),
            }
            for name, rows in by.items()
            if rows
        }

    def window_means(self, begin_ns: int, end_ns: int) -> dict[str, float]:
        """Mean of each column over the samples inside the window, in the tracks' units (power in W
        under the key "power_w", not the column's mW)."""
        inside = [s for s in self.samples if begin_ns <= s[0] <= end_ns]
        out: dict[str, float] = {}
        for key, (_track, _unit, scale) in TRACKS.items():
            if key in self.columns and inside:
                k = self.columns.index(key)
                out["power_w" if key == "power_mw" else key] = sum(s[k] for s in inside) / len(inside) * scale
        return out


def _linear(times: Sequence[float], values: Sequence[float], t: float) -> float:
    """values at t, linear between the two neighbouring times; the end value outside them."""
    i = bisect.bisect_left(times, t)
    if i <= 0:
        return values[0]
    if i >= len(times):
        return values[-1]
    t0, t1 = times[i - 1], times[i]
    return values[i - 1] + (values[i] - values[i - 1]) * (t - t0) / (t1 - t0) if t1 > t0 else values[i]


def _median_gap_ms(updates: list[tuple[float, float]]) -> float | None:
    gaps = sorted(b[0] - a[0] for a, b in itertools.pairwise(updates))
    return gaps[len(gaps) // 2] / 1e6 if gaps else None


def _counter_method(updates: list[tuple[float, float]]) -> str:
    return COUNTER_METHOD.format(period=_median_gap_ms(updates) or 0.0)
