"""The typed run schema (hwprof.schema): it reads every run.json the fixtures hold and writes it back byte for
byte, a damaged field of any summary gives one line naming the file and the field, and it knows every key
a collector writes into its summary (so the schema stays the documentation of what each collector gives)."""

from __future__ import annotations

import ast
import json
import re
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from hwprof.collectors.base import CollectorResult
from hwprof.collectors.rapl.collector import measure_update_interval

from hwprof.rundir.reader import SCHEMA_VERSION, RunData, RunDirError
from hwprof.schema.codec import specs
from hwprof.schema.run import SUMMARY_TYPES, RunDoc
from hwprof.schema.summaries_cpu import RaplUpdateInterval
from hwprof.schema.summaries_gpu import CudaGraphSummary
from hwprof.schema.summaries_tools import PyspySummary

ROOT = Path(__file__).resolve().parents[1]
RUN_FILES = sorted((ROOT / "tests" / "fixtures").rglob("run.json"))
SUMMARIES = [
    (path, name)
    for path in RUN_FILES
    for name, entry in json.loads(path.read_text()).get("collectors", {}).items()
    if entry.get("summary") is not None
]


def _dump(doc: Any) -> str:
    """As hwprof writes run.json (hwprof.rundir.reader.write_run_json)."""
    return json.dumps(doc, indent=1, default=str)


def _id(path: Path) -> str:
    return str(path.parent.relative_to(ROOT / "tests" / "fixtures"))


def test_the_fixtures_hold_run_files() -> None:
    assert len(RUN_FILES) >= 4 and len(SUMMARIES) >= 20


@pytest.mark.parametrize("path", RUN_FILES, ids=_id)
def test_run_json_round_trip_is_byte_identical(path: Path) -> None:
    doc = json.loads(path.read_text())
    run = RunDoc.read(doc, str(path))
    assert _dump(run.to_json()) == _dump(doc)
    if path.read_text().rstrip("\n") == _dump(doc):  # written by hwprof: the very bytes
        assert _dump(run.to_json()) == path.read_text().rstrip("\n")


@pytest.mark.parametrize(("path", "name"), SUMMARIES, ids=lambda v: v if isinstance(v, str) else _id(v))
def test_every_summary_round_trips_and_is_known(path: Path, name: str) -> None:
    raw = json.loads(path.read_text())["collectors"][name]["summary"]
    summary = SUMMARY_TYPES[name].from_json(raw, str(path), f"collectors.{name}.summary.")
    assert _dump(summary.to_json()) == _dump(raw)
    assert summary.unknown_keys() == [], f"{name}'s summary holds keys hwprof.schema does not describe"


def test_unknown_keys_survive_a_round_trip() -> None:
    doc = {"schema_version": SCHEMA_VERSION, "status": "ok", "from_a_newer_hwprof": [1, 2]}
    doc["collectors"] = {"rapl": {"status": "ok", "summary": {"future": {"a": 1}, "source": "powercap"}}}
    run = RunDoc.read(doc, "run.json")
    assert run.unknown_keys() == ["from_a_newer_hwprof", "collectors.rapl.summary.future"]
    assert _dump(run.to_json()) == _dump(doc)


@pytest.mark.parametrize("weights", ["random init", {"path": "/w/y8n.pt", "format": "state_dict", "sha256": "ab"}])
def test_the_model_weights_are_a_note_or_what_was_loaded(weights: Any) -> None:
    """--weights FILE records the loaded file's description (workload.zoo), a random model "random init"."""
    doc = {"schema_version": SCHEMA_VERSION, "status": "ok", "model": {"name": "yolov8n", "weights": weights}}
    assert _dump(RunDoc.read(doc, "run.json").to_json()) == _dump(doc)


@pytest.mark.parametrize("weights", [3, ["a"], True])
def test_the_model_weights_of_another_type_are_refused_in_one_line(weights: Any) -> None:
    """A field of several JSON types (a string or an object) is checked against each of them."""
    doc = {"schema_version": SCHEMA_VERSION, "status": "ok", "model": {"name": "yolov8n", "weights": weights}}
    with pytest.raises(RunDirError) as caught:
        RunDoc.read(doc, "run.json")
    assert str(caught.value).startswith('run.json: field "model.weights" must be a string or an object, found ')


def _wrong_value(types: tuple[type, ...]) -> Any:
    return "damaged" if str not in types else 7


def _first_typed_key(name: str) -> tuple[str, Any]:
    for key, spec in specs(SUMMARY_TYPES[name]).items():
        if spec.types is not None:
            return key, _wrong_value(spec.types)
    raise AssertionError(f"{name}'s summary has no typed field")


@pytest.mark.parametrize("name", sorted(SUMMARY_TYPES))
def test_a_damaged_summary_field_names_file_and_field(tmp_path: Path, name: str) -> None:
    key, value = _first_typed_key(name)
    run = {"schema_version": SCHEMA_VERSION, "status": "complete", "passes": {}}
    run["collectors"] = {name: {"status": "ok", "summary": {key: value}}}
    (tmp_path / "run.json").write_text(json.dumps(run))
    with pytest.raises(RunDirError) as err:
        RunData.load(tmp_path)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{tmp_path / 'run.json'}: ") and f'"collectors.{name}.summary.{key}"' in message


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("collectors.rapl.summary.per_layer.reason", 3, "must be a string, found a number (3)"),
        ("collectors.perf_events.summary.checks.task_clock_vs_process_cpu", [], "must be an object"),
        ("stages.forward.p50_ms", None, "must be a number, found null"),
        ("passes.timing.overhead.forward_off_ms", "x", "must be a number"),
        ("collectors.pyspy.summary.native", "yes", "must be a boolean"),
    ],
)
def test_a_damaged_nested_field_names_its_path(tmp_path: Path, field: str, value: Any, expected: str) -> None:
    run: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "status": "complete"}
    run["stages"] = {"forward": {"n": 1, "mean_ms": 1, "stdev_ms": 0, "p50_ms": 1, "p90_ms": 1, "p99_ms": 1}}
    run["passes"] = {"timing": {"status": "ok"}}
    run["collectors"] = {n: {"status": "ok", "summary": {}} for n in ("rapl", "perf_events", "pyspy")}
    node = run
    parts = field.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    (tmp_path / "run.json").write_text(json.dumps(run))
    with pytest.raises(RunDirError, match=re.escape(f'run.json: field "{field}" {expected}')):
        RunData.load(tmp_path)


# -- the collectors' own code: every key a collector writes into its summary is a field of its summary type

COLLECTOR_OF = {
    "torch_profiler/memory_collector": "torch_memory",
    "gpu/kineto": "gpu_kineto",
    "gpu/nvml": "nvml",
    "gpu/ncu": "ncu",
    "gpu/cudagraph": "cuda_graph",
}


def _collector(path: Path) -> str | None:
    rel = path.relative_to(ROOT / "collectors")
    for prefix, name in COLLECTOR_OF.items():
        if str(rel).startswith(prefix):
            return name
    name = rel.parts[0].removesuffix(".py")
    return name if name in SUMMARY_TYPES else None


def _target_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _summary_subscript(target: ast.expr) -> str | None:
    """The key of `summary["key"] = ...`."""
    if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
        return str(target.slice.value) if _target_name(target.value) == "summary" else None
    return None


def _summary_keys(tree: ast.AST) -> set[str]:
    """Top-level keys written into a variable named summary/result: dict literals assigned to it (or
    returned by a function named *summary), `summary["k"] = ...`, `summary.update(k=...)`, the keywords
    of a typed summary made with `XSummary.of(k=...)` and its fields set afterwards (`summary.k = ...`)."""
    keys: set[str] = set()

    def literal(value: ast.expr | None) -> None:
        if isinstance(value, ast.Dict):
            keys.update(k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if _target_name(target) == "summary" or (
                    _target_name(target) == "result" and isinstance(target, ast.Attribute)
                ):
                    literal(node.value)
                if (key := _summary_subscript(target)) is not None:
                    keys.add(key)
                if isinstance(target, ast.Attribute) and _target_name(target.value) == "summary":
                    keys.add(target.attr)  # a typed summary's field set after it was made
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            updated = node.func.attr == "update" and _target_name(node.func.value) == "summary"
            typed = node.func.attr == "of" and str(_target_name(node.func.value)).endswith("Summary")
            if updated or typed:
                keys.update(k.arg for k in node.keywords if k.arg)
        elif isinstance(node, ast.FunctionDef) and node.name.endswith("summary") and node.name != "to_summary":
            for ret in ast.walk(node):
                if isinstance(ret, ast.Return):
                    literal(ret.value)
    return keys


def _written_keys() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for path in sorted((ROOT / "collectors").rglob("*.py")):
        name = _collector(path)
        if name is not None:
            out.setdefault(name, set()).update(_summary_keys(ast.parse(path.read_text())))
    return out


def test_the_schema_knows_every_key_a_collector_writes() -> None:
    written = _written_keys()
    assert {"timing", "rapl", "sysstat", "perf_events", "gpu_kineto", "nvml", "cuda_graph", "ncu"} <= set(written)
    assert {"energy_J_is", "per_layer", "cpi_per_kernel", "launch_overhead_share"} <= set().union(*written.values())
    unknown = {name: sorted(keys - set(specs(SUMMARY_TYPES[name]))) for name, keys in written.items()}
    assert {n: k for n, k in unknown.items() if k} == {}


def test_a_collector_result_writes_its_typed_summary_as_the_json_it_replaced() -> None:
    typed = CudaGraphSummary.of(iters=5, eager_ms_p50=2.0, graph_ms_p50=1.0, launch_overhead_share=None)
    typed.method = "median"
    raw = {"iters": 5, "eager_ms_p50": 2.0, "graph_ms_p50": 1.0, "launch_overhead_share": None, "method": "median"}
    assert _dump(CollectorResult("ok", summary=typed).to_dict()) == _dump(CollectorResult("ok", summary=raw).to_dict())
    assert list(CollectorResult("ok").to_dict()) == ["status", "reason", "fix", "summary", "artifacts"]
    assert not CudaGraphSummary() and CudaGraphSummary.of(iters=None)


def test_rapl_sub_records_know_what_rapl_writes() -> None:
    """The nested records of rapl's summary, from the functions that build them (the fixtures hold only a
    machine whose counter never moved)."""
    ticks = count()
    moving = measure_update_interval(lambda: float(next(ticks)), budget_s=0.01)
    still = measure_update_interval(lambda: 1.0, budget_s=0.01)
    for probe in (moving, still):
        assert RaplUpdateInterval.from_json(probe.to_json(), "run.json").unknown_keys() == []
    assert moving.value_ms is not None and still.value_ms is None


def test_fields_set_with_update_are_written_in_the_order_given_a_none_as_null() -> None:
    """pyspy's collector adds the tool's figures to the converted summary; a count py-spy did not print
    (errors, samples_reported) was written as null, and still is."""
    summary = PyspySummary.of(format="chrometrace", clock={"mode": "markers"})
    summary.update(returncode=0, command="py-spy record", errors=None, samples_reported=None)
    summary.native_off = None
    assert summary.to_json() == {
        "format": "chrometrace",
        "clock": {"mode": "markers"},
        "returncode": 0,
        "command": "py-spy record",
        "errors": None,
        "samples_reported": None,
    }
    assert list(summary.to_json()) == ["format", "clock", "returncode", "command", "errors", "samples_reported"]
