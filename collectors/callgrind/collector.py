"""Simulated counters per layer: the pipeline under valgrind's callgrind (`--counters callgrind`).

Where no PMU exists (VMs, CI runners), callgrind counts every instruction and simulates caches
and branch predictors, the same from run to run. The worker runs under callgrind with
instrumentation off; it is switched on for the last warm-up iteration (to warm the simulated
caches) and every measured marker issues a client request `DUMP_STATS_AT(<marker index>)`
(hwprof.collectors.callgrind.client_requests: no C extension). After the worker exits the parts are summed into
counter readings at the markers and fed to the same table code as perf_events and PAPI, so the
report's instruction, MPKI and branch columns come from it, each labelled simulated.

valgrind's virtual CPU hides AVX-512: torch and oneDNN take their AVX2 code paths under it, so
the counts describe that code, not what this host runs natively (ONEDNN_MAX_CPU_ISA=AVX2 with
ATEN_CPU_CAPABILITY=avx2 make a native run comparable). Cycles are not simulated.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from hwprof.collectors.base import AttachedTool, Capability, Collector, CollectorResult, PassContext
from hwprof.collectors.callgrind.dump_tables import MARKERS_FILE, NAME, OUT_FILE, CallgrindReport
from hwprof.collectors.callgrind.tool import (
    ENV_FIX,
    ENV_VALGRIND,
    INSTALL_FIX,
    MIN_VERSION,
    callgrind_command,
    find_valgrind,
)

from hwprof.core.markers import MarkerLog
from hwprof.schema.probes import CallgrindProbe
from hwprof.schema.summaries_cpu import CallgrindSummary

if TYPE_CHECKING:
    from hwprof.core.config import RunConfig
    from hwprof.core.markers import Marker

DEFAULT_ITERATIONS = 1
SLOWDOWN = (50, 150)
"""callgrind with cache and branch simulation against native, measured here on convolutions (issue 12)."""


class CallgrindCollector(Collector):
    name = NAME
    cannot_attach = "Valgrind starts the process it simulates: it cannot join a running service"
    title = "simulated per-layer counters under valgrind's callgrind"
    last_warmup = True
    pass_name = "callgrind"
    subscribes = True
    order = 95
    clean_iterations = False
    needs_layer_markers = True
    default_enabled = False

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self.markers = MarkerLog()
        """The measured markers, in dump order: a dump's label is its marker's index here."""
        self.measuring = False
        self.instrumenting = False

    @classmethod
    def wanted(cls, config: RunConfig) -> bool:
        if config.only:
            return cls.name in config.only
        return config.counters == "callgrind" and cls.name not in config.skip

    @classmethod
    def check_options(cls, config: RunConfig) -> None:
        """Asked for by --counters callgrind: refuse at once, with the fix, when valgrind is unusable."""
        if config.counters == "callgrind":
            cap = cls.probe(config)
            if not cap.available:
                raise ValueError(f"--counters callgrind: {cap.sentence()}")

    @classmethod
    def probe(cls, config: RunConfig) -> Capability:
        import platform

        if platform.machine() not in ("x86_64", "AMD64"):
            return Capability.unavailable(f"client requests are written for amd64, not {platform.machine()}")
        valgrind, why = find_valgrind()
        if valgrind is None and why.startswith(ENV_VALGRIND + "="):
            return Capability.unavailable(why, ENV_FIX)
        if valgrind is None:
            need = f"valgrind >= {MIN_VERSION[0]}.{MIN_VERSION[1]} is needed ({why})"
            return Capability.unavailable(need, INSTALL_FIX)
        details = CallgrindProbe.of(valgrind=valgrind.binary, version=".".join(map(str, valgrind.version)))
        return Capability.ok(details=details)

    def wrap_command(self, command: list[str], ctx: PassContext) -> list[str]:
        valgrind, why = find_valgrind()
        if valgrind is None:
            raise FileNotFoundError(f"valgrind: {why}; fix: {INSTALL_FIX}")
        estimate = self.time_estimate(ctx)
        if estimate:
            print(f"callgrind pass: {estimate}", file=sys.stderr, flush=True)
        return callgrind_command(valgrind, (ctx.out_dir / OUT_FILE).resolve(), command)

    def time_estimate(self, ctx: PassContext) -> str:
        """Before a pass 50-150x slower than native starts: about how long, from the timing pass's iteration."""
        from hwprof.core.markers import read_markers
        from hwprof.core.spans import forward_p50_ms

        path = ctx.run_dir / "passes" / "timing" / "markers.jsonl"
        p50 = forward_p50_ms(read_markers(path)) if path.exists() else None
        if not p50:
            return ""
        instrumented = 1 + self.iteration_limit(ctx)
        low, high = (p50 / 1e3 * instrumented * k for k in SLOWDOWN)
        return (
            f"estimate {low:.0f}-{high:.0f} s for {instrumented} instrumented iterations "
            f"(forward p50 {p50:.1f} ms x {SLOWDOWN[0]}-{SLOWDOWN[1]} under callgrind), plus start-up"
        )

    def iteration_limit(self, ctx: PassContext) -> int:
        return int(self.config.extra.get("callgrind_iters", DEFAULT_ITERATIONS))

    def on_marker(self, marker: Marker) -> None:
        from hwprof.collectors.callgrind import client_requests as vc

        if marker.warmup and marker.kind == "iteration" and marker.phase == "B" and marker.iteration == -1:
            vc.start_instrumentation()  # the last warm-up iteration warms the simulated caches
            self.instrumenting = True
        if not self.measuring or marker.warmup:
            return
        self.markers(marker)
        vc.dump_stats_at(str(len(self.markers.markers) - 1))

    def start(self, ctx: PassContext) -> None:
        from hwprof.collectors.callgrind import client_requests as vc

        if not self.instrumenting:
            vc.start_instrumentation()
            self.instrumenting = True
        vc.zero_stats()
        self.measuring = True

    def stop(self, ctx: PassContext) -> None:
        from hwprof.collectors.callgrind import client_requests as vc

        self.measuring = False
        vc.dump_stats_at("end")
        vc.stop_instrumentation()

    def close(self, ctx: PassContext) -> CollectorResult:
        from hwprof.collectors.callgrind import client_requests as vc

        self.markers.flush_to(ctx.out_dir / MARKERS_FILE)
        return CollectorResult("ok", summary=CallgrindSummary.of(under_valgrind=vc.running_on_valgrind() > 0))

    def attach(self, pid: int, ctx: PassContext) -> AttachedTool | None:
        return CallgrindReport(ctx)


COLLECTOR = CallgrindCollector
