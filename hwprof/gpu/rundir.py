"""`hwprof gpu-import --out DIR`: a run directory made from recorded GPU files (a torch.profiler CUDA trace,
Nsight Compute CSVs, NVML samples, measured peaks), recorded by hwprof or not, so that `hwprof report`,
`trace` and `compare` read it like any run.

It is written by the writers the live GPU collectors use (collectors/gpu/kineto/pass_outputs.write_outputs, the
ncu layer_tables(...).save, NVML's sample file, gpu_peaks.json), into the passes a live `--device cuda`
run has: passes/gpu (gpu_kineto, nvml), passes/ncu and passes/ncu_range.

Clock: the run's clock is the Kineto trace's own (baseTimeNanoseconds + ts: the wall clock of the machine
that recorded it); the pass's markers are the trace's `forward` and `layer <i> <Type>` ranges (recorded
data, not hwprof's stage markers), so kernels sit on them with no offset. NVML samples are on that
machine's CLOCK_MONOTONIC, and a recording holds no pair of readings of both clocks: without a measured
pair they cannot be placed on the trace, so they are kept (nvml.samples.json.gz) for their energy windows,
which are on the same clock as the samples, and left off the trace with the reason in run.json.
"""

from __future__ import annotations

import datetime
import gzip
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hwprof.analysis.advice.table import ADVICE_FILE, Advice
from hwprof.analysis.gpu.advice import GpuBaseline, gpu_advice
from hwprof.analysis.run_analysis import analyse
from hwprof.core.atomic import atomic_write_text
from hwprof.core.markers import Marker
from hwprof.gpu.importer import import_nvml
from hwprof.rundir.reader import RunData
from hwprof.rundir.writer import write_run_json
from hwprof.schema.check import SCHEMA_VERSION
from hwprof.schema.codec import JsonObject, json_value
from hwprof.schema.gpu_import import GpuRecording, RecordedDevice
from hwprof.schema.host import HostDoc, TorchBuild
from hwprof.schema.pass_files import LayerEntry, ModelInfo
from hwprof.schema.run import (
    CollectorEntry,
    ImportConfiguration,
    ImportedDoc,
    RunConfigDoc,
    RunDoc,
)
from hwprof.schema.run_passes import PassDoc
from hwprof.schema.summaries_cpu import Summary
from hwprof.schema.summaries_gpu import GpuKinetoSummary, KinetoClock, NcuSummary, NvmlSummary
from hwprof.session.registry import gpu_parsers

if TYPE_CHECKING:
    from hwprof.session.registry import GpuAttribution, GpuTrace

CLOCK_METHOD = (
    "imported: the run's clock is the Kineto trace's own (baseTimeNanoseconds + ts) and the markers are its "
    "'forward' and 'layer <i> <Type>' ranges, so kernels need no offset"
)
NVML_OFF_TRACE = (
    "NVML samples are on the recording machine's CLOCK_MONOTONIC and the Kineto trace on its wall clock; the "
    "recording holds no pair of readings of both clocks, so the samples are not placed on the trace (energy "
    "over the recorded benchmark windows, on the samples' own clock, is kept)"
)


@dataclass
class ImportSources:
    """The recorded files one imported run is made from."""

    kineto: Path
    ncu: Path | None = None
    ncu_range: Path | None = None
    peaks: Path | None = None
    """gpu_results.json (its `peaks` and `device`) or hwprof's GPU peaks cache file."""
    nvml: Path | None = None
    bench: Path | None = None
    """gpu_results.json whose `bench` windows get their NVML energy."""
    model: str | None = None
    launch_cats: tuple[str, ...] | None = None
    experiments: Path | None = None
    """gpu_experiments.json: eager against CUDA graph, precisions, memory formats, batches."""
    compiled: Path | None = None
    """gpu_compile.json: torch.compile against eager, with compile time."""
    batch: int = 1
    precision: str | None = None
    """None: from the --kineto file's name (kineto_<model>_<imgsz>_<precision>...), as the recordings name it."""
    channels_last: bool = False

    def files(self) -> list[Path]:
        found = [self.kineto, self.ncu, self.ncu_range, self.peaks, self.nvml, self.bench]
        found += [self.experiments, self.compiled]
        return list(dict.fromkeys(p for p in found if p is not None))


def layer_types(trace: GpuTrace) -> dict[int, str]:
    """Top-level layer index -> type, from the trace's `layer <i> <Type>` ranges."""
    out: dict[int, str] = {}
    for r in trace.layers:
        if m := gpu_parsers().layer_range.match(r.name):
            out[int(m.group(1))] = m.group(2)
    return out


def trace_markers(trace: GpuTrace) -> list[Marker]:
    """The forward and layer ranges of the trace as the pass's markers (all measured, none warm-up)."""
    out: list[Marker] = []
    for i, fwd in enumerate(trace.forwards):
        out.append(Marker("stage", "B", "forward", fwd.ts, i, False))
        for r in trace.layers:
            m = gpu_parsers().layer_range.match(r.name)
            if m and fwd.ts <= r.ts < fwd.end:
                idx = int(m.group(1))
                out.append(Marker("layer", "B", f"model.{idx}", r.ts, i, False, idx))
                out.append(Marker("layer", "E", f"model.{idx}", r.end, i, False, idx))
        out.append(Marker("stage", "E", "forward", fwd.end, i, False))
    out.sort(key=lambda m: (m.t_ns, m.phase == "B"))
    return out


def model_info(name: str, types: dict[int, str]) -> ModelInfo:
    """model.json from what the trace records: each top-level layer's index and type. Parameters, shapes and
    FLOPs are not in a trace: they are left out (null), not guessed."""
    layers = [
        LayerEntry.of(
            index=i,
            name=f"model.{i}",
            type=t,
            qualified_type=t,
            depth=1,
            from_edges=[],
            params=None,
            weight_bytes=None,
            in_bytes=None,
            out_bytes=None,
            in_shapes=[],
            out_shapes=[],
        )
        for i, t in sorted(types.items())
    ]
    return ModelInfo.of(
        name=name,
        family="imported",
        weights="not recorded",
        random_init=False,
        params=None,
        params_fused=None,
        input_shape=[],
        layers=layers,
    )


def _peaks_json(recorded: GpuRecording) -> JsonObject:
    """gpu_peaks.json: the recording's device and measured peaks."""
    return {"device": recorded.device.to_json(), "peaks": recorded.peak_table()}


def _host(device: RecordedDevice) -> HostDoc:
    """The recording machine's host facts where the recording states them (gpu_results.json's `device`)."""
    host = HostDoc.of(recorded=bool(device))
    if device.cpu:
        host.update(cpu_model=device.cpu.split(":", 1)[-1].strip())
    if device.nproc:
        host.update(logical_cpus=device.nproc)
    if device.python:
        host.update(python=device.python)
    if device.torch:
        host.update(torch=TorchBuild.of(version=device.torch, cpu_capability="not recorded"))
    return host


def _ok(collectors: list[str]) -> PassDoc:
    return PassDoc.of(status="ok", returncode=0, error="", collectors=collectors)


def _write_json(path: Path, doc: object) -> None:
    atomic_write_text(path, json.dumps(doc, indent=1))


@dataclass
class _Written:
    """What an import wrote, in run.json's order: each collector's entry and each pass's collectors."""

    collectors: dict[str, CollectorEntry] = field(default_factory=dict)
    passes: dict[str, list[str]] = field(default_factory=dict)

    def add(self, pass_name: str, collector: str, summary: Summary) -> None:
        self.collectors[collector] = CollectorEntry.of(status="ok", pass_name=pass_name, summary=summary)
        self.passes.setdefault(pass_name, []).append(collector)


def write_import_run(src: ImportSources, out: Path, command: list[str]) -> RunDoc:
    """Write the run directory `out` (a new or empty folder) and return its run.json (before finalize)."""
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out}: exists and is not empty (give a new folder to --out)")
    parsers = gpu_parsers()
    trace = parsers.load_gpu_trace(src.kineto)
    att = parsers.attribute(trace) if src.launch_cats is None else parsers.attribute(trace, src.launch_cats)
    if not att.forwards:
        raise ValueError(f"{src.kineto}: no 'forward' range with GPU activity: nothing to import")
    name = src.model or src.kineto.name.split(".")[0]
    gpu = out / "passes" / "gpu"
    written = _Written()
    written.add("gpu", "gpu_kineto", _write_kineto_pass(src, gpu, name, trace, att))
    recorded = GpuRecording.load(src.peaks) if src.peaks else GpuRecording()
    if src.peaks:
        _write_json(gpu / "gpu_peaks.json", _peaks_json(recorded))
    if src.nvml:
        shutil.copyfile(src.nvml, gpu / "nvml.samples.json.gz")
        written.add("gpu", "nvml", nvml_summary(src.nvml, src.bench))
    for pass_name, csv, replay in (("ncu", src.ncu, "kernel"), ("ncu_range", src.ncu_range, "app-range")):
        if csv is not None:
            written.add(pass_name, pass_name, _write_ncu_pass(out / "passes" / pass_name, csv, replay))
    for pass_name in written.passes:
        _write_json(out / "passes" / pass_name / "result.json", {"pass": pass_name, "status": "ok", "error": ""})
    imported = _imported_doc(src, out, trace, recorded)
    run = _run_doc(out, command, name, len(att.forwards), imported, recorded.device, written)
    doc = RunDoc.read(json_value(run.to_json()), str(out / "run.json"))
    write_run_json(out, doc)
    return doc


def _write_kineto_pass(
    src: ImportSources, gpu: Path, name: str, trace: GpuTrace, att: GpuAttribution
) -> GpuKinetoSummary:
    """passes/gpu as the live Kineto collector writes it (model.json from the trace's layer ranges, its
    markers, the raw trace gzipped, the attributed outputs); returns the collector's summary."""
    parsers = gpu_parsers()
    gpu.mkdir(parents=True)
    _write_json(gpu / "model.json", model_info(name, layer_types(trace)).to_json())
    markers = "".join(json.dumps(m.to_row()) + "\n" for m in trace_markers(trace))
    atomic_write_text(gpu / "markers.jsonl", markers)
    raw = gpu / "gpu_kineto.trace.json.gz"
    if src.kineto.suffix == ".gz":
        shutil.copyfile(src.kineto, raw)
    else:
        with open(src.kineto, "rb") as inp, gzip.open(raw, "wb") as dst:
            shutil.copyfileobj(inp, dst)
    clock = KinetoClock.of(offset_ns=0, error_ns=None, pairs=0, method=CLOCK_METHOD)
    parsers.write_kineto_outputs(gpu, "gpu_kineto", trace, att, clock)
    return parsers.kineto_run_summary(trace, att, clock)


def _write_ncu_pass(pdir: Path, csv: Path, replay: str) -> NcuSummary:
    """passes/ncu (kernel replay) or passes/ncu_range (app-range) from one ncu CSV: the CSV copied, the
    per-layer tables and kernels; returns the collector's summary."""
    parsers = gpu_parsers()
    pass_name = pdir.name
    report = parsers.load_ncu_csv(csv)
    tables, kernels = (
        parsers.ncu_layer_tables(report, None) if replay == "kernel" else parsers.ncu_layer_tables(None, report)
    )
    pdir.mkdir()
    shutil.copyfile(csv, pdir / f"{pass_name}.csv{'.gz' if csv.suffix == '.gz' else ''}")
    tables.save(pdir / f"{pass_name}.metrics.json")
    if kernels:
        _write_json(pdir / f"{pass_name}.kernels.json", {"layers": kernels})
    return NcuSummary.of(replay=report.replay, rows=len(report.rows), layers=len(tables.layers))


def _imported_doc(src: ImportSources, out: Path, trace: GpuTrace, recorded: GpuRecording) -> ImportedDoc:
    """run.json's `imported`: the files, the device, the recorded experiments (copied into the run)."""
    files = [str(p) for p in src.files()]
    device = trace.device_name or (recorded.device.name or "")
    experiments = _copy_recorded(src, out)
    return ImportedDoc.of(
        files=files,
        device=device,
        recorded_on=_recorded_on(recorded.device),
        configuration=configuration(src),
        experiments=experiments,
    )


def _run_doc(
    out: Path,
    command: list[str],
    name: str,
    forwards: int,
    imported: ImportedDoc,
    device: RecordedDevice,
    written: _Written,
) -> RunDoc:
    return RunDoc.of(
        schema_version=SCHEMA_VERSION,
        run_id=out.name,
        status="complete",
        created=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        command=command,
        imported=imported,
        config=RunConfigDoc.of(model=name, device="cuda", iters=forwards),
        host=_host(device),
        clock={"id": "Kineto trace clock (recording machine's wall clock)", "unit": "ns", "method": CLOCK_METHOD},
        collectors=written.collectors,
        passes={p: _ok(collectors) for p, collectors in written.passes.items()},
        peaks=None,
        stages={},
    )


RECORDED_DIR = Path("passes") / "gpu" / "recorded"
"""Where an imported run keeps the recorded experiments its advice.json is built from."""
EXPERIMENTS, COMPILED = "gpu_experiments.json", "gpu_compile.json"
_PRECISION = re.compile(r"_(fp32|fp16|bf16)(?:[._]|$)")


def configuration(src: ImportSources) -> ImportConfiguration:
    """The recorded forwards' configuration, as given to gpu-import (a Kineto trace does not state it), kept
    out of run.json's config so that compare still says batch and size were not in the trace."""
    precision = src.precision
    if precision is None and (m := _PRECISION.search(src.kineto.name)):
        precision = m.group(1)
    return ImportConfiguration.of(
        batch=src.batch,
        precision=precision,
        channels_last=src.channels_last,
        source="gpu-import options (--batch, --precision or the --kineto file's name, --channels-last)",
    )


def _copy_recorded(src: ImportSources, out: Path) -> list[str]:
    copied = []
    for path, name in ((src.experiments, EXPERIMENTS), (src.compiled, COMPILED)):
        if path is not None:
            (out / RECORDED_DIR).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, out / RECORDED_DIR / name)
            copied.append(str(RECORDED_DIR / name))
    return copied


def run_baseline(run: RunDoc) -> GpuBaseline | None:
    """The run's model, batch, precision and memory format (an imported run's from its import options);
    None where one is not known."""
    given = run.imported.configuration if run.imported is not None else None
    cfg = given if given else run.config
    if not run.config.model or not cfg.batch or not cfg.precision:
        return None
    return GpuBaseline(run.config.model, cfg.batch, cfg.precision, bool(cfg.channels_last))


def _read_list(path: Path) -> list[JsonObject]:
    return list(json.loads(path.read_text())) if path.exists() else []


def recorded_gpu_advice(run_dir: Path, recordings: Path | None = None) -> Advice | None:
    """The advice table the H100 recordings give for a GPU run (none is present to run the candidates):
    from the run's own copies (passes/gpu/recorded/, written by gpu-import), else from `recordings` (a folder
    holding gpu_experiments.json and gpu_compile.json). None for a CPU run, a run whose configuration is not
    known, or when neither place holds the experiments."""
    data = RunData.load(run_dir)
    if data.doc.device == "cpu" or (base := run_baseline(data.doc)) is None:
        return None
    folder = Path(run_dir) / RECORDED_DIR
    if not any((folder / n).exists() for n in (EXPERIMENTS, COMPILED)):
        if recordings is None or not any((recordings / n).exists() for n in (EXPERIMENTS, COMPILED)):
            return None
        folder = recordings
    return gpu_advice(base, analyse(data).findings, _read_list(folder / EXPERIMENTS), _read_list(folder / COMPILED))


def write_recorded_advice(run_dir: Path) -> Advice | None:
    """advice.json of an imported run, from the experiments gpu-import copied into it (None: nothing written)."""
    advice = recorded_gpu_advice(run_dir)
    if advice is not None:
        _write_json(Path(run_dir) / ADVICE_FILE, advice.to_dict())
    return advice


def _recorded_on(device: RecordedDevice) -> str:
    if not device:
        return "not stated in the imported files"
    return ", ".join(part for part in (device.name, device.torch, device.cuda) if part)


def nvml_summary(path: Path, bench: Path | None) -> NvmlSummary:
    """nvml's run.json summary for an imported run: the series, its energy per recorded benchmark window,
    no per-iteration figure (the profiled forwards are not on the samples' clock), and why not on the trace."""
    imported = import_nvml(path, bench)
    return NvmlSummary.of(
        samples=imported.samples,
        window_s=imported.span_s,
        columns=imported.columns,
        j_per_iteration=None,
        energy_unavailable=(
            "the profiled forwards are on the Kineto trace's clock, the NVML samples on CLOCK_MONOTONIC, and the "
            "recording holds no pair of readings of both: see the recorded benchmark windows' energy"
        ),
        bench_windows=[w.to_json() for w in imported.windows],
        trace=NVML_OFF_TRACE,
    )
