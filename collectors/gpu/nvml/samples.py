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
estimate.

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

from hwprof.records import CounterSample

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


@dataclass
class NvmlSeries:
    columns: list[str]
    samples: list[list[float]]

    @classmethod
    def load(cls, path: Path) -> NvmlSeries:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as handle:
            data = json.load(handle)
        return cls(list(data["columns"]), sorted(data["samples"], key=lambda s: s[0]))

    def to_dict(self) -> dict[str, Any]:
        return {"columns": self.columns, "samples": self.samples}

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
        return _counter_method(self.counter_updates()) if "energy_mj" in self.columns else POWER_METHOD

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
        return joules, POWER_METHOD

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
