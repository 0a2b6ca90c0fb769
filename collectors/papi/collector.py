"""Per-layer and per-stage counters through PAPI (python-papi), selected with `--counters papi`.

PAPI counts the thread that started its event set, and python-papi does not expose the
PAPI_INHERIT option: torch's intra-op threads are NOT counted. The counts cover the thread that
runs the model (the worker's main thread); with --threads 1 that is all of the compute, with
more threads it is only the main thread's share. The summary says so. For all threads, use the
perf_event engine (--counters perf). An event set belongs to its thread, so there is no
interval sampler here.

Same outputs as perf_events: papi.metrics.json (hwprof.perf.metric_tables) and papi.readings.jsonl
(hwprof.perf.readings; one group; PAPI does not multiplex here, so time_enabled and time_running
are both written as the reading's sequence number, which makes every delta unscaled).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hwprof.collectors.base import Capability, Collector, CollectorResult, PassContext

from hwprof.core.atomic import atomic_path
from hwprof.core.config import RunConfig
from hwprof.perf import readings as readings_io
from hwprof.perf.counting import Count, Reading
from hwprof.perf.derived import cache_line_size
from hwprof.perf.metric_tables import analyse, summary_checks
from hwprof.perf.open_errors import NO_PMU_FIX
from hwprof.schema.probes import PapiProbe
from hwprof.schema.records import metrics_path
from hwprof.schema.summaries_cpu import CounterChecks, PapiSummary

if TYPE_CHECKING:
    from hwprof.core.markers import Marker

DEFAULT_PRESETS: tuple[str, ...] = (
    "PAPI_TOT_CYC",
    "PAPI_TOT_INS",
    "PAPI_L1_DCM",
    "PAPI_L2_TCM",
    "PAPI_L3_TCM",
    "PAPI_FP_OPS",
)
COUNTED = (
    "the thread that runs the model only (PAPI counts the calling thread; python-papi cannot set "
    "PAPI_INHERIT): torch's intra-op worker threads are NOT counted, so with --threads N > 1 the counts "
    "cover the main thread's share of the work; use --threads 1 for complete counts, or --counters perf"
)
PERF_FALLBACK_FIX = "or use --counters perf (perf_event_open, which falls back to software events)"


@dataclass
class PapiApi:
    """The parts of python-papi used here; tests inject a fake with the same shape."""

    low: Any
    """pypapi.papi_low"""
    events: Any
    """pypapi.events (preset codes)"""
    error: type[Exception]
    """pypapi.exceptions.PapiError"""


def load_api() -> PapiApi:
    from pypapi import events, exceptions, papi_low

    return PapiApi(papi_low, events, exceptions.PapiError)


@dataclass
class EventSet:
    handle: int
    added: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    """name -> the PAPI error raised when adding it."""
    started: bool = False


class PapiUnavailable(Exception):
    def __init__(self, reason: str, fix: str, failed: dict[str, str] | None = None) -> None:
        super().__init__(reason)
        self.reason, self.fix, self.failed = reason, fix, failed or {}


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def requested(config: RunConfig) -> list[str]:
    return list(config.events) if config.events else list(DEFAULT_PRESETS)


def component_problem(api: PapiApi) -> tuple[str, str]:
    """(reason, fix) from the CPU component's own disabled_reason, where PAPI gives one."""
    try:
        info = api.low.get_component_info(0)
    except Exception:  # python-papi raises plain errors here on some builds
        info = None
    name = getattr(info, "name", "cpu component")
    reason = str(getattr(info, "disabled_reason", "") or "")
    if not getattr(info, "disabled", 0):
        return "", NO_PMU_FIX
    text = f"PAPI component {name} is disabled: {reason or 'no reason given'}"
    if "paranoid" in reason.lower() or "permission" in reason.lower():
        return text, "`sysctl -w kernel.perf_event_paranoid=1` or run with CAP_PERFMON"
    return text, NO_PMU_FIX


def start_eventset(api: PapiApi, names: list[str]) -> EventSet:
    """library_init, create an event set, add what can be added, start; or raise PapiUnavailable."""
    low = api.low
    try:
        if not low.is_initialized():
            low.library_init()
        handle = low.create_eventset()
    except api.error as exc:
        raise PapiUnavailable(f"PAPI did not initialise: {_err(exc)}", PERF_FALLBACK_FIX) from None
    es = EventSet(handle)
    for name in names:
        try:
            code = getattr(api.events, name, None)
            if isinstance(code, int):
                low.add_event(handle, code)
            else:
                low.add_named_event(handle, name)
            es.added.append(name)
        except api.error as exc:
            es.failed[name] = _err(exc)
    start_error = ""
    try:
        low.start(handle)
        es.started = True
    except api.error as exc:
        start_error = f"start: {_err(exc)}"
    if es.started and es.added:
        return es
    release(api, es)
    problem, fix = component_problem(api)
    if problem:  # the cause in PAPI's own words; each event's library error stays in the probe's details
        refused = f"{len(es.failed)} events refused" if es.failed else "nothing could start"
        raise PapiUnavailable(
            f"{problem}: PAPI counts no hardware event here ({refused})", f"{fix}; {PERF_FALLBACK_FIX}", es.failed
        )
    by_error: dict[str, list[str]] = {}
    for name, why in es.failed.items():
        by_error.setdefault(why, []).append(name)
    parts = [f"add_event({', '.join(names)}): {why}" for why, names in by_error.items()]
    parts += [start_error] if start_error else []
    if not es.added and not start_error:
        parts.append("no event could be added")
    raise PapiUnavailable("; ".join(parts), f"{fix}; {PERF_FALLBACK_FIX}", es.failed)


def release(api: PapiApi, es: EventSet) -> list[int] | None:
    values = None
    if es.started:
        try:
            values = list(api.low.stop(es.handle))
        except api.error:
            values = None
        es.started = False
    for call in (api.low.cleanup_eventset, api.low.destroy_eventset):
        with contextlib.suppress(api.error):
            call(es.handle)
    return values


class Papi(Collector):
    name = "papi"
    title = "per-layer counters (PAPI, model thread only)"
    pass_name = "layers"
    subscribes = True
    order = 90
    needs_layer_markers = True
    switchable = True
    default_enabled = False

    @classmethod
    def wanted(cls, config: RunConfig) -> bool:
        if cls.name in config.skip:
            return False
        if config.counters == "papi":
            return not config.only or bool({cls.name, "perf_events"} & set(config.only))
        return cls.name in config.only

    @classmethod
    def probe(cls, config: RunConfig) -> Capability:
        try:
            api = load_api()
        except ImportError as exc:
            return Capability.unavailable(f"python-papi is not importable: {exc}", "pip install python-papi")
        try:
            es = start_eventset(api, requested(config))
        except PapiUnavailable as exc:
            return Capability.unavailable(exc.reason, exc.fix, details=PapiProbe.of(failed=exc.failed))
        try:
            api.low.read(es.handle)
        finally:
            release(api, es)
        return Capability.ok(details=PapiProbe.of(events=es.added, failed=es.failed))

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self.api: PapiApi | None = None
        self.es: EventSet | None = None
        self.problem: PapiUnavailable | None = None
        self.readings: list[tuple[Marker, list[int], int | None]] = []
        self.read_ns: list[int] = []

    def open(self, ctx: PassContext) -> None:
        try:
            self.api = load_api()
        except ImportError as exc:
            self.problem = PapiUnavailable(f"python-papi is not importable: {exc}", "pip install python-papi")
            return
        try:
            self.es = start_eventset(self.api, requested(self.config))
        except PapiUnavailable as exc:
            self.problem = exc

    def on_marker(self, marker: Marker) -> None:
        es, api = self.es, self.api
        if marker.warmup or es is None or api is None:
            return
        t0 = time.perf_counter_ns()
        values = api.low.read(es.handle)
        self.read_ns.append(time.perf_counter_ns() - t0)
        cpu = None if marker.kind == "layer" else time.clock_gettime_ns(time.CLOCK_PROCESS_CPUTIME_ID)
        self.readings.append((marker, list(values), cpu))

    def close(self, ctx: PassContext) -> CollectorResult:
        if self.problem is not None:
            summary = PapiSummary.of(failed=self.problem.failed)
            return CollectorResult("unavailable", self.problem.reason, self.problem.fix, summary)
        if self.es is None or self.api is None:
            return CollectorResult("failed", reason="PAPI was never opened")
        es = self.es
        release(self.api, es)
        self.es = None
        names = es.added
        readings = [
            Reading(
                m.kind,
                m.phase,
                m.name,
                m.iteration,
                m.t_ns,
                {n: Count(int(v), k, k) for n, v in zip(names, values, strict=True)},
                cpu,
            )
            for k, (m, values, cpu) in enumerate(self.readings, 1)
        ]
        line_size, _ = cache_line_size()
        analysis = analyse(readings, dict.fromkeys(names, "count"), None, line_size)
        out = ctx.out_dir
        analysis.tables.save(metrics_path(out, self.name))
        readings_file = out / f"{self.name}.readings.jsonl"
        with atomic_path(readings_file) as tmp, open(tmp, "w") as f:
            events = {n: {"unit": "count", "scale": 1.0, "source": "papi", "pmu": ""} for n in names}
            f.write(readings_io.header_line(events, [names], inherit=False) + "\n")
            for k, (m, values, cpu) in enumerate(self.readings, 1):
                row = [m.kind, m.phase, m.name, m.iteration, m.t_ns]
                f.write(readings_io.marker_line(row, cpu, {0: (k, k, values)}) + "\n")
        reads = sorted(self.read_ns)
        summary = PapiSummary.of(
            engine="PAPI (python-papi), low-level API",
            counted=COUNTED,
            threads=self.config.threads,
            events_requested=requested(self.config),
            events_opened=names,
            unavailable=es.failed,
            iterations_measured=analysis.iterations,
            totals=analysis.totals,
            checks=CounterChecks.of(layers_plus_gap_vs_forward=summary_checks(analysis).layers_plus_gap_vs_forward),
            read_cost={"reads": len(reads), "p50_us": reads[len(reads) // 2] / 1e3 if reads else None},
            interval_samples=None,
            interval_note="no sampler: only the thread that started a PAPI event set may read it",
        )
        status = "partial" if es.failed else "ok"
        reason = "; ".join(f"{n}: {why}" for n, why in es.failed.items())
        return CollectorResult(
            status,
            reason,
            "",
            summary,
            [ctx.relpath(metrics_path(out, self.name)), ctx.relpath(readings_file)],
        )


COLLECTOR = Papi
