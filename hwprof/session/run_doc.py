"""run.json as a collect builds it, pass by pass: each pass's outcome recorded (its passes entry, its
collectors' entries, the runtime it ran), the interruption a stop signal caused, and the host's peaks."""

from __future__ import annotations

from hwprof.perf.neighbours import neighbours_json
from hwprof.rundir.names import PASSES, WORKER_LOG
from hwprof.schema.codec import JsonObject, json_value
from hwprof.schema.host import PeaksDoc
from hwprof.schema.pass_files import RuntimeFile
from hwprof.schema.run import RunDoc, RuntimeDoc
from hwprof.schema.run_passes import NeighboursDoc, PassDoc, PassPhasesDoc
from hwprof.schema.runtime_checks import ProfiledPass
from hwprof.session.outcome import PassOutcome
from hwprof.session.plan import Plan
from hwprof.session.stopping import StopSignals


def interruption(run: RunDoc, plan: Plan, stop: StopSignals) -> JsonObject:
    """run.json "interrupted": the signal, how often it came, and which passes ran, stopped or never started."""
    ran = list(run.passes)
    return {
        "signal": stop.name or "SIGINT",
        "signals_received": max(stop.count, 1),
        "escalated": stop.escalated,
        "passes_interrupted": [n for n, p in run.passes.items() if p.status == "interrupted"],
        "passes_not_run": [p.name for p in plan.passes if p.name not in ran],
    }


def record_outcome(run: RunDoc, outcome: PassOutcome, where: str) -> None:
    """The pass's run.json entry, its collectors' entries and the runtime it ran; `where`: run.json's path."""
    entry = PassDoc.of(
        status=outcome.status,
        returncode=outcome.returncode,
        wall_s=round(outcome.wall_s, 3),
        pid=outcome.pid,
        error=outcome.error,
        collectors=sorted(outcome.results),
        log=f"{PASSES}/{outcome.name}/{WORKER_LOG}",
        host_steal_share=outcome.host_steal_share,
        neighbours=NeighboursDoc.from_json(
            json_value(neighbours_json(outcome.neighbours)), where, f"passes.{outcome.name}.neighbours."
        ),
        worker_start="forked" if outcome.forked else "started",
    )
    if outcome.stopping is not None:
        entry.update(stopping=outcome.stopping)
    if outcome.phases:
        entry.update(phases=PassPhasesDoc.of(**outcome.phases))
    if outcome.program is not None:
        entry.update(program=outcome.program)
    if outcome.frames is not None:
        entry.update(frames=outcome.frames)
    if outcome.inputs is not None:
        entry.update(inputs=outcome.inputs)
    if outcome.lingering:
        entry.update(lingering=json_value([x.to_dict() for x in outcome.lingering]))
    run.passes[outcome.name] = entry
    for name, result in outcome.results.items():
        run.collectors[name] = result.entry(pass_name=outcome.name)
    if outcome.runtime:
        _record_runtime(run, outcome.name, outcome.runtime, where)


PROFILER_KEYS = ("profiler", "clock", "replayed_layer_markers", "profile_error")
"""The keys of a pass's runtime info that run.json keeps per pass, under runtime.profiled_passes.<pass>."""


def _record_runtime(run: RunDoc, pass_name: str, info: RuntimeFile, where: str) -> None:
    """run.json's "runtime": what ran the forward (from the first pass), and each profiled pass's clock."""
    doc = info.to_json()
    profiler = {k: doc.pop(k) for k in PROFILER_KEYS if k in doc}
    if run.runtime is None:
        first = json_value({"name": info.runtime, **doc, "profiled_passes": {}})
        run.update(runtime=RuntimeDoc.from_json(first, where, "runtime."))
    runtime = run.runtime
    if profiler and runtime is not None and runtime.profiled_passes is not None:
        prefix = f"runtime.profiled_passes.{pass_name}."
        runtime.profiled_passes[pass_name] = ProfiledPass.from_json(json_value(profiler), where, prefix)


def peaks_doc(threads: int, where: str) -> PeaksDoc:
    """run.json's peaks: this host's measured peak GFLOP/s and GB/s (cached per host when measured on a quiet
    host), for the roofline, or why there are none; beside them the CPU's paper peak. `where`: run.json's path."""
    from hwprof.core.host import cpuinfo_text
    from hwprof.hardware.machine import measure_peaks
    from hwprof.hardware.paper_peak import paper_peak

    paper = paper_peak(cpuinfo_text(), threads).to_dict()
    try:
        peaks = measure_peaks(threads).to_dict()
    except Exception as exc:
        peaks = {
            "status": "unavailable",
            "reason": f"measuring the peaks failed: {type(exc).__name__}: {exc}",
            "fix": "hwprof doctor --peaks --force",
        }
    from hwprof.core.envvars import cache_note
    from hwprof.hardware.machine import cache_path

    note = cache_note()
    cache = f"{cache_path(threads)}" + (f" ({note})" if note else "")
    return PeaksDoc.from_json(json_value({**peaks, "paper": paper, "cache_file": cache}), where, "peaks.")
