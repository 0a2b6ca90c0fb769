"""The run directory and its run.json (versioned schema; documented in docs/run-directory.md, its reference
generated from hwprof.schema).

results/<run-id>/
  run.json                 what ran, on what, what was unavailable and why, stage latency
  config.json images.json  the inputs every pass read
  layers.csv summary.json  the layer table joined with every per-layer metric; the report's figures
  passes/<pass>/           per pass: markers.jsonl, model.json, result.json, worker.log,
                           command.json and each collector's artifacts and records

Reports and traces are made from the run directory alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from hwprof.core.markers import Marker, read_marker_file
from hwprof.rundir.invariants import check_invariants, correct_old_fps
from hwprof.rundir.lock import holder
from hwprof.rundir.names import (
    ADVICE_JSON,
    LAYER_ERRORS_FILE,
    METRICS_SUFFIX,
    MODEL_DIR,
    PASSES,
    RECORDS_SUFFIX,
    RESULT_JSON,
    RUN_JSON,
)
from hwprof.schema.check import SCHEMA_VERSION, RunDirError, read_json_object
from hwprof.schema.gpu_files import K, KinetoKernel, NcuKernel, read_layer_kernels
from hwprof.schema.pass_files import ModelInfo, PassResult, RuntimeFile
from hwprof.schema.records import RUNTIME_FILE, MetricTables
from hwprof.schema.run import CollectorEntry, RunDoc, S
from hwprof.schema.runtime_checks import LayerErrors

__all__ = ["RUN_JSON", "SCHEMA_VERSION", "RunData", "RunDirError"]


NOT_FINISHED = "not finished: its collect was killed or crashed"
"""The status the report shows for a run.json that says "running" with no collect holding its lock."""


def abandoned_or_running(root: Path) -> tuple[bool, str]:
    """What a run.json that still says "running" means: a collect holds its lock, or the one that wrote it
    is gone (killed with SIGKILL, crashed, its machine lost) and the run will never be finished. (Whether it
    is abandoned, the warning that says so.)"""
    holding = holder(root)
    if holding is not None:
        return False, f"this run is still being collected ({holding.describe()}): its figures are not final"
    return True, (
        "run.json says running, but no collect holds this run directory's lock: the collect that wrote it "
        "was killed or crashed before it finished, and what it wrote is all there is"
    )


@dataclass(frozen=True)
class RecordsFile:
    """One collector's <collector>.records.jsonl in one pass's folder; its text is read when asked for (a long
    run's records are hundreds of thousands of lines, and a withheld collector's are never read)."""

    pass_name: str
    collector: str
    path: Path

    def content(self) -> str:
        return self.path.read_text()


def records_files(root: Path | str, pass_name: str | None = None) -> list[RecordsFile]:
    """The records files of one pass's folder, or of every pass folder (listed in run.json or not), in path order."""
    base = Path(root) / PASSES
    found = (
        sorted((base / pass_name).glob("*" + RECORDS_SUFFIX))
        if pass_name
        else sorted(base.glob("*/*" + RECORDS_SUFFIX))
    )
    return [RecordsFile(p.parent.name, p.name.removesuffix(RECORDS_SUFFIX), p) for p in found]


def advice_path(root: Path | str) -> Path:
    """Where a run directory keeps its advice.json (`hwprof advise` writes it)."""
    return Path(root) / ADVICE_JSON


def read_json_if_present(path: Path) -> Any:
    """A JSON file parsed, None when there is none; unreadable or not JSON: OSError or ValueError."""
    return json.loads(path.read_text()) if path.exists() else None


def read_layer_errors(root: Path) -> LayerErrors | None:
    """model/layer_errors.json: each layer's output error of the run's runtime against the reference
    (hwprof.workload.layer_error makes it); None when absent or unparseable, RunDirError (one line) for a
    damaged field. The first pass's worker asks it too, before the run's run.json is final."""
    path = root / MODEL_DIR / LAYER_ERRORS_FILE
    try:
        doc = dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None
    return LayerErrors.from_json(doc, str(path))


@dataclass
class RunData:
    root: Path
    doc: RunDoc
    """run.json, typed and checked (hwprof.schema.run): readers take it, never the JSON's dict. A copy of the
    run with another document (analysis setting a collector aside) is dataclasses.replace(data, doc=...)."""
    withheld: frozenset[str] = field(default_factory=frozenset)
    """Collectors whose metric tables analysis set aside (hwprof.analysis.validity)."""

    warnings: list[str] = field(default_factory=list)
    """What the readers found damaged but could read past (a torn last line): the report shows them."""
    shown_status: str = ""
    """The run's status as the report shows it: run.json's, except a "running" that no collect holds any
    more (NOT_FINISHED). "" until load sets it."""
    _markers: dict[str, tuple[list[Marker], str | None]] = field(default_factory=dict, repr=False, compare=False)
    """Parsed markers by pass, with the torn-line warning of their file: shared by the copies made with
    dataclasses.replace (validity's, the collect's finished run)."""
    _results: dict[str, PassResult] = field(default_factory=dict, repr=False, compare=False)
    _metrics: dict[Path, MetricTables] = field(default_factory=dict, repr=False, compare=False)
    """Parsed metric tables by file, each parsed once per run and shared likewise."""

    @classmethod
    def load(cls, root: Path | str) -> RunData:
        root = Path(root)
        path = root / RUN_JSON
        if not path.is_file():
            raise RunDirError(f"{root} is not a run directory (no {RUN_JSON})")
        data = cls(root, RunDoc.load(path))
        data.warnings += correct_old_fps(data.doc)
        check_invariants(data.doc, str(path))
        data.shown_status = str(data.doc.status or "?")
        if data.doc.status == "running":
            abandoned, warning = abandoned_or_running(root)
            data.warnings.append(warning)
            if abandoned:
                data.shown_status = NOT_FINISHED
        if data.doc.finish_error:
            data.warnings.append(f"{data.doc.finish_error} (when the collect finished; the passes' files are whole)")
        return data

    def pass_dir(self, name: str) -> Path:
        return self.root / PASSES / name

    @property
    def pass_names(self) -> list[str]:
        """The passes whose figures can be used: recorded in run.json, finished, with their folder."""
        return [p for p in self.doc.passes if p not in self.unavailable_passes]

    @cached_property
    def unavailable_passes(self) -> dict[str, str]:
        """Pass name -> why its figures are unavailable, for each pass run.json records that cannot be used."""
        out = {}
        for name, entry in self.doc.passes.items():
            if not entry.finished:
                out[name] = f"the {name} pass was {entry.status} (run {self.doc.status})"
            elif not self.pass_dir(name).is_dir():
                out[name] = f"the {name} pass's folder passes/{name} is missing from {self.root}"
        return out

    @cached_property
    def missing_passes(self) -> dict[str, str]:
        """Pass name -> why its figures are unavailable, for each pass that was planned but cannot give them:
        it stopped mid-way or lost its folder (unavailable_passes), or the run stopped before it began."""
        out = dict(self.unavailable_passes)
        if self.doc.status in ("interrupted", "running"):
            ran = ("ok", "partial")
            wanted = {e.pass_name for e in self.doc.collectors.values() if e.status in ran and e.pass_name}
            for name in sorted(wanted - set(self.doc.passes)):
                out[name] = f"the run was {self.doc.status} before the {name} pass"
        return out

    def pass_missing(self, name: str) -> str | None:
        """Why a pass's figures are unavailable (None when it ran, or when it was simply not planned)."""
        if name in self.missing_passes:
            return self.missing_passes[name]
        if name not in self.doc.passes and self.doc.status in ("interrupted", "running"):
            return f"the run was {self.doc.status} before the {name} pass"
        return None

    def pass_result(self, pass_name: str) -> PassResult:
        """The worker's result.json of a pass (an empty record when it wrote none or it cannot be read), parsed
        once; a damaged field raises RunDirError naming the file and the field."""
        if pass_name not in self._results:
            path = self.pass_dir(pass_name) / RESULT_JSON
            try:
                doc = json.loads(path.read_text())
            except (OSError, ValueError):
                doc = {}
            self._results[pass_name] = PassResult.read(doc, str(path))
        return self._results[pass_name]

    def runtime_file(self, pass_name: str) -> RuntimeFile | None:
        """The pass's runtime.json (what executed its forward), None when it wrote none; RunDirError (one line)
        for a damaged field."""
        path = self.pass_dir(pass_name) / RUNTIME_FILE
        doc = self.pass_json(pass_name, RUNTIME_FILE)
        return None if doc is None else RuntimeFile.from_json(doc, str(path))

    @cached_property
    def gpu_kernels(self) -> dict[str, list[KinetoKernel]]:
        """passes/gpu/gpu_kineto.kernels.json: each layer's kernels in the torch.profiler trace (none when the
        pass wrote none); RunDirError (one line) for a damaged field."""
        return self._layer_kernels("gpu", "gpu_kineto.kernels.json", KinetoKernel)

    @cached_property
    def ncu_kernels(self) -> dict[str, list[NcuKernel]]:
        """passes/ncu/ncu.kernels.json: each layer's kernels as Nsight Compute replayed them (none when the
        pass wrote none); RunDirError (one line) for a damaged field."""
        return self._layer_kernels("ncu", "ncu.kernels.json", NcuKernel)

    def _layer_kernels(self, pass_name: str, file_name: str, row: type[K]) -> dict[str, list[K]]:
        doc = self.pass_json(pass_name, file_name)
        return {} if doc is None else read_layer_kernels(doc, row, str(self.pass_dir(pass_name) / file_name))

    def pass_json(self, pass_name: str, file_name: str) -> Any:
        """A JSON file of a pass's folder (named or not in run.json), parsed; None when the pass wrote none.
        A damaged file raises (ValueError): it is not the same as a file never written."""
        path = self.pass_dir(pass_name) / file_name
        return json.loads(path.read_text()) if path.exists() else None

    def first_pass_json(self, file_name: str) -> Any:
        """The file of the first usable pass (run order) that wrote it, parsed; None when none did."""
        for name in self.pass_names:
            if (self.pass_dir(name) / file_name).exists():
                return self.pass_json(name, file_name)
        return None

    def layer_errors(self) -> LayerErrors | None:
        """model/layer_errors.json (see read_layer_errors)."""
        return read_layer_errors(self.root)

    def markers(self, pass_name: str) -> list[Marker]:
        """The pass's markers, read once; a torn last line adds a warning (RunDirError for a corrupt line)."""
        if pass_name not in self._markers:
            path = self.pass_dir(pass_name) / "markers.jsonl"
            self._markers[pass_name] = read_marker_file(path) if path.exists() else ([], None)
        markers, warning = self._markers[pass_name]
        if warning and warning not in self.warnings:  # a copy with warnings of its own gets it on first read
            self.warnings.append(warning)
        return list(markers)

    @cached_property
    def model_file(self) -> ModelInfo:
        """model.json of the layers pass if there was one (layer table of --depth), else of any pass; an empty
        record when no pass wrote one. A damaged field raises RunDirError naming the file and the field."""
        path = self._model_path
        return ModelInfo.from_json(read_json_object(path), str(path)) if path is not None else ModelInfo()

    @cached_property
    def _model_path(self) -> Path | None:
        for name in sorted(self.pass_names, key=lambda n: n != "layers"):
            path = self.pass_dir(name) / "model.json"
            if path.exists():
                return path
        return None

    def metrics(self) -> dict[str, MetricTables]:
        """collector name -> its metric tables, from every pass (each file parsed once per run)."""
        out = {}
        for name in self.pass_names:
            for path in sorted(self.pass_dir(name).glob("*" + METRICS_SUFFIX)):
                collector = path.name.removesuffix(METRICS_SUFFIX)
                if collector in self.withheld:
                    continue
                if path not in self._metrics:
                    self._metrics[path] = MetricTables.load(path)
                out[collector] = self._metrics[path]
        return out

    def has_files(self, names: tuple[str, ...]) -> bool:
        """Whether every one of these files is in the run directory's top folder."""
        return all((self.root / name).exists() for name in names)

    def files_bytes(self, names: tuple[str, ...]) -> dict[str, bytes]:
        """The content of those of these files the run directory's top folder holds (the plots, for report.html)."""
        return {name: (self.root / name).read_bytes() for name in names if (self.root / name).is_file()}

    # --- typed run.json (hwprof.schema.run) ---

    def entry(self, name: str) -> CollectorEntry:
        """Collector `name`'s run.json entry (an empty one, status "", when the run does not name it)."""
        return self.doc.entry(name)

    def summary(self, kind: type[S], name: str = "") -> S:
        """Collector kind.NAME's (or `name`'s) typed summary; an empty one when it wrote none."""
        return self.doc.summary(kind, name)
