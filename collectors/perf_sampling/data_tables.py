"""perf.data of the kernels pass -> kernel tables, per-layer metrics and per-thread kernel spans.

Files written beside perf.data (pass folder):
- perf_sampling.kernels.json: per layer, stage, thread and kernel (hwprof.core.kernels.tables_dict)
- perf_sampling.metrics.json: per-layer and per-stage figures for layers.csv (samples, shares by kind, CPI)
- perf_sampling.records.jsonl: thread names and every sample as a callstack sample (thread, CPU,
  instant, the kernel it ran with its library), for the Perfetto trace: an instant, never a span,
  so the trace draws a sample where the tables charge it
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hwprof.collectors.perf_sampling.demangle import demangled, script_flags
from hwprof.collectors.perf_sampling.script import (
    OPENMP_LABEL,
    SCRIPT_FIELDS,
    SCRIPT_FIELDS_NO_CPU,
    Code,
    Sample,
    classify,
    finish_counts,
    parse_script,
)

from hwprof.core.atomic import atomic_write_text
from hwprof.core.kernel_causes import KernelCause, cause_of_chain, cause_of_leaf
from hwprof.core.kernels import (
    BETWEEN_LAYERS,
    KIND_ATEN,
    KIND_JIT,
    KIND_KERNEL,
    KIND_ONEDNN,
    KIND_OPENMP,
    KIND_PYTHON,
    KINDS,
    MIN_LAYER_SHARE,
    Bucket,
    KernelTables,
    attribute,
    derived,
    most,
    tables_dict,
)
from hwprof.core.markers import read_markers
from hwprof.core.spans import measured_pieces
from hwprof.schema.records import MetricTables, StackSample, ThreadName, metrics_path, records_path, write_records
from hwprof.schema.summaries_tools import PerfSamplingSummary

NAME = "perf_sampling"
SHARE_METRICS = {
    "onednn_share": (KIND_JIT, KIND_ONEDNN),
    "jit_share": (KIND_JIT,),
    "aten_share": (KIND_ATEN,),
    "openmp_share": (KIND_OPENMP,),
    "kernel_space_share": (KIND_KERNEL,),
    "python_share": (KIND_PYTHON,),
}


@dataclass
class Converted:
    files: list[str] = field(default_factory=list)
    summary: PerfSamplingSummary = field(default_factory=PerfSamplingSummary)


def code_of(sample: Sample) -> Code:
    return classify(sample.sym, sample.dso, sample.ip)


def cause_of(sample: Sample, code: Code) -> KernelCause | None:
    """Why a kernel-space sample was in the kernel: by its callchain where perf recorded one, else by
    its leaf symbol (marked so); None for a sample in user space."""
    if code.kind != KIND_KERNEL:
        return None
    if sample.kernel_chain:
        return cause_of_chain(sample.kernel_chain)
    return cause_of_leaf(sample.sym)


def is_named(name: str) -> bool:
    """A symbol, not an address: what the OpenMP runtime ran is known by its library only."""
    return not name.startswith("[unknown") and name != OPENMP_LABEL


def is_labelled(name: str) -> bool:
    """Named, or at least known to be the OpenMP runtime."""
    return not name.startswith("[unknown")


def read_samples(binary: str, data: Path, flags: list[str] | None = None) -> list[Sample]:
    """`perf script` over perf.data, streamed and parsed (without the CPU field where perf.data has none), its
    symbols demangled after (hwprof.collectors.perf_sampling.demangle: by perf itself where that fails)."""
    flags = script_flags() if flags is None else flags
    samples, err, returncode = _script(binary, data, SCRIPT_FIELDS, flags)
    if not samples and "cpu" in err.lower():
        samples, err, returncode = _script(binary, data, SCRIPT_FIELDS_NO_CPU, flags)
    if returncode != 0 and not samples:
        raise ValueError(f"perf script failed ({returncode}): {err.strip().splitlines()[-1:] or ''}")
    if flags:
        names = demangled(s.sym for s in samples)
        if names is None:
            return read_samples(binary, data, [])
        for sample in samples:
            sample.sym = names.get(sample.sym, sample.sym)
    samples.sort(key=lambda s: (s.t_ns, s.tid))
    return samples


def _script(binary: str, data: Path, fields: str, flags: list[str]) -> tuple[list[Sample], str, int | None]:
    command = [binary, "script", "-i", str(data), "-F", fields, "--ns", *flags]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace") as p:
        assert p.stdout is not None
        samples = list(parse_script(p.stdout))
        err = p.stderr.read() if p.stderr else ""
    return samples, err, p.returncode


def layer_metrics(bucket: Bucket, events: list[str], named: float) -> dict[str, float]:
    row: dict[str, float] = {"samples": float(bucket.samples), "named_share": named}
    for metric, kinds in SHARE_METRICS.items():
        row[metric] = sum(bucket.share(k) for k in kinds)
    if bucket.weight:
        row["top_kernel_share"] = most(bucket.kernels, 1)[0][1] / bucket.weight
    row.update(derived(bucket.counts.get("", {}), events))
    return row


def named_share(bucket: Bucket, test: Callable[[str], bool] = is_named) -> float:
    return sum(w for name, w in bucket.kernels.items() if test(name)) / bucket.weight if bucket.weight else 0.0


def metric_tables(tables: KernelTables, events: list[str], rate: int) -> MetricTables:
    def row(b: Bucket) -> dict[str, float]:
        return layer_metrics(b, events, named_share(b))

    units = {"samples": "count", "top_kernel_share": "fraction", "named_share": "fraction", "cpi": "cycles/instr"}
    units.update({m: "fraction" for m in SHARE_METRICS})
    sampled = "sampled time (all threads)"
    return MetricTables(
        layers={name: row(b) for name, b in tables.layers.items() if name != BETWEEN_LAYERS},
        stages={name: row(b) for name, b in tables.stages.items()},
        units=units,
        methods={
            "samples": f"perf record samples at {rate} Hz per thread, all threads, summed over "
            f"{tables.iterations} measured iterations (estimate: sampling)",
            "named_share": f"share of {sampled} in code with a symbol (JIT kernels named by oneDNN's perf map)",
            "openmp_share": f"share of {sampled} inside the OpenMP runtime: threads waiting, spinning or forking",
            "onednn_share": f"share of {sampled} in oneDNN (JIT kernels and library code)",
            "top_kernel_share": f"share of {sampled} in the layer's most sampled kernel",
        },
    )


def stack_samples(samples: list[Sample]) -> list[StackSample]:
    """Every sample as what it is, one thread's code at one instant: the kernel by the name the
    tables give it, its library as the frame's mapping (perf recorded no call chain)."""
    out = []
    for s in samples:
        code = code_of(s)
        out.append(StackSample(s.tid, s.t_ns, [(code.name, code.library)], s.cpu, s.period))
    return out


def thread_names(samples: list[Sample], pid: int | None) -> list[ThreadName]:
    comms: dict[int, str] = {}
    for s in samples:
        comms.setdefault(s.tid, s.comm)
    return [ThreadName(tid, "pipeline (main)" if tid == pid else f"{comm} worker {tid}") for tid, comm in comms.items()]


def convert(binary: str, data: Path, out_dir: Path, rate: int, pid: int | None = None) -> Converted:
    started = time.monotonic()
    samples = read_samples(binary, data)
    if not samples:
        raise ValueError(f"{data}: no samples")
    events = finish_counts(samples)
    markers_file = out_dir / "markers.jsonl"
    pieces = measured_pieces(read_markers(markers_file)) if markers_file.exists() else []
    tables = attribute(samples, code_of, pieces, cause_of)
    doc = tables_dict(tables, events, KINDS)
    callchains = any(s.kernel_chain is not None for s in samples)
    doc.update(rate_hz=rate, sampling_event=samples[0].event, callchains=callchains)
    out = Converted()
    atomic_write_text(out_dir / f"{NAME}.kernels.json", json.dumps(doc, indent=1))
    out.files.append(f"{NAME}.kernels.json")
    metric_tables(tables, events, rate).save(metrics_path(out_dir, NAME))
    out.files.append(metrics_path(out_dir, NAME).name)
    main_pid = pid if pid is not None else _main_tid(samples)
    records: list[StackSample | ThreadName] = [*thread_names(samples, main_pid), *stack_samples(samples)]
    write_records(records_path(out_dir, NAME), records)
    out.files.append(records_path(out_dir, NAME).name)
    fwd = tables.forward
    big = sorted(
        row["samples"]
        for name, row in doc["layers"].items()
        if name != BETWEEN_LAYERS and row["share_of_forward"] >= MIN_LAYER_SHARE
    )
    out.summary = PerfSamplingSummary.of(
        samples_total=len(samples),
        samples_measured=sum(b.samples for b in tables.stages.values()),
        samples_forward=fwd.samples,
        samples_outside_measured=tables.outside,
        iterations=tables.iterations,
        threads=len(tables.threads),
        sampling_event=samples[0].event,
        group_events=events,
        forward_named_share=named_share(fwd),
        forward_labelled_share=named_share(fwd, is_labelled),
        forward_named_share_outside_openmp=named_outside_openmp(fwd),
        forward_shares={k: fwd.share(k) for k in KINDS if fwd.kinds.get(k)},
        callchains=callchains,
        forward_kernel_causes={c: w / (fwd.weight or 1.0) for c, w in most(fwd.causes)},
        top_kernels=[[name, w / (fwd.weight or 1.0)] for name, w in most(fwd.kernels, 5)],
        layer_samples_min=min(big, default=0),
        layer_samples_median=big[len(big) // 2] if big else 0,
        layers_at_1pct=len(big),
        layers_with_too_few_samples=doc["layers_with_too_few_samples"],
        convert_s=round(time.monotonic() - started, 3),
    )
    return out


def named_outside_openmp(bucket: Bucket) -> float:
    """Named weight over all weight, both outside the OpenMP runtime: a share of one whole. (Named weight over
    the weight outside OpenMP, as it was, reached 1.0029 in a real run: OpenMP's own named symbols were in the
    numerator and not in the denominator.)"""
    busy = bucket.weight - bucket.kinds.get(KIND_OPENMP, 0.0)
    named = sum(
        w for name, w in bucket.kernels.items() if is_named(name) and bucket.kernel_kind.get(name) != KIND_OPENMP
    )
    return named / busy if busy > 0 else 0.0


def _main_tid(samples: list[Sample]) -> int | None:
    """The process's own thread: its tid is the pid, the smallest tid perf saw."""
    return min((s.tid for s in samples), default=None)
