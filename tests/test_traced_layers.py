"""A traced (TorchScript) model's layers: named as the eager model's, found again in torch.profiler's module
hierarchy, and their spans replayed as layer markers. Real torch.jit.trace and real profiles of small models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from hwprof.collectors.torch_profiler.clock import SyncData, sync_ranges, wall_pair
from hwprof.collectors.torch_profiler.convert import convert
from hwprof.collectors.torch_profiler.kineto import load_kineto
from hwprof.collectors.torch_profiler.module_layers import FROM_MEASURED, FROM_WARMUP, HIERARCHY_ARG

from hwprof.core.marker_order import marker_order_fault
from hwprof.core.markers import layer_modules
from hwprof.program.finder import is_scripted, layer_root
from hwprof.workload.layers import layer_table, scripted_layer_table
from hwprof.workload.script_scopes import UNKNOWN_INSTANCE, Level, layer_scopes, parse_hierarchy

pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.trace"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script"),
]
X = torch.randn(1, 3, 32, 32)


class Blk(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.act = torch.nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.conv(x))


class Seq(torch.nn.Module):
    """A module calling its Sequential: the Sequential is a level of the hierarchy."""

    def __init__(self) -> None:
        super().__init__()
        self.model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), Blk(), Blk())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)


class Shared(torch.nn.Module):
    """ultralytics' Conv: one activation shared by every instance (TorchScript names it INSTANCE_NAME_UNKNOWN)."""

    default_act = torch.nn.SiLU()

    def __init__(self, c1: int, c2: int) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(c1, c2, 3, padding=1)
        self.act = self.default_act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.conv(x))


class Head(torch.nn.Module):
    """ultralytics' Detect: two ModuleLists whose children have the same names and classes."""

    def __init__(self) -> None:
        super().__init__()
        self.cv2 = torch.nn.ModuleList(torch.nn.Conv2d(8, 4, 1) for _ in range(2))
        self.cv3 = torch.nn.ModuleList(torch.nn.Conv2d(8, 2, 1) for _ in range(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.cat((self.cv2[i](x), self.cv3[i](x)), 1) for i in range(2)], 1)


class Yolo(torch.nn.Module):
    """A YOLO-like model: it iterates its layer list (no Sequential call), its layers share an activation."""

    def __init__(self) -> None:
        super().__init__()
        self.model = torch.nn.Sequential(Shared(3, 8), Shared(8, 8), Head())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for m in self.model:
            x = m(x)
        return x


def _traced(model: torch.nn.Module) -> Any:
    with torch.no_grad():
        return torch.jit.trace(model.eval(), X, check_trace=False)


def _profile(
    traced: Any, tmp_path: Path, iterations: int = 2, with_modules: bool = True, first: int = 0
) -> tuple[Path, SyncData]:
    """`iterations` calls under torch.profiler, in hwprof's iteration and forward ranges numbered from `first`,
    with the collector's clock syncs: a trace as the trace pass records it (first -1: its warm-up forward)."""
    from torch.autograd.profiler import record_function
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad():
        traced(X)
        with profile(activities=[ProfilerActivity.CPU], with_modules=with_modules) as prof:
            start, pairs = sync_ranges(torch), [wall_pair()]
            for i in range(first, first + iterations):
                with record_function(f"hwprof:iteration:{i}"), record_function("hwprof:stage:forward"):
                    traced(X)
            pairs.append(wall_pair())
            stop = sync_ranges(torch)
    path = tmp_path / f"kineto{first}.json"
    prof.export_chrome_trace(str(path))
    return path, SyncData(start, stop, pairs)


def test_a_traced_model_keeps_the_eager_layer_names_classes_and_parameters() -> None:
    eager = Seq()
    traced = _traced(eager)
    assert is_scripted(traced)
    root, why = layer_root(traced)
    assert root is traced and why.startswith("model.model")
    assert [n for n, _, _ in layer_modules(traced, 2)] == [n for n, _, _ in layer_modules(eager, 2)]
    rows, eager_rows = scripted_layer_table(traced, 2), layer_table(eager, X, 2)
    as_eager = [(r.name, r.index, r.type, r.qualified_type, r.params, r.weight_bytes) for r in eager_rows]
    assert [(r.name, r.index, r.type, r.qualified_type, r.params, r.weight_bytes) for r in rows] == as_eager
    assert rows[1].type == "Blk" and rows[1].qualified_type.endswith("test_traced_layers.Blk")
    # what TorchScript drops (no hook fires to see shapes; no `f` attribute) is unknown, not zero
    assert all(r.in_bytes is None and r.out_bytes is None and r.from_ == [] for r in rows)


def test_hierarchy_strings_parse_to_levels() -> None:
    text = "TOP(Yolo)::forward.0(Shared)::forward.INSTANCE_NAME_UNKNOWN(SiLU)::forward3."
    assert parse_hierarchy(text) == [Level("TOP", "Yolo"), Level("0", "Shared"), Level(UNKNOWN_INSTANCE, "SiLU")]
    assert parse_hierarchy("TOP(__torch__.a.___torch_mangle_7.Conv)::forward.") == [Level("TOP", "Conv")]
    # a scripted model's TorchScript function (F.silu) is a frame of no module
    assert parse_hierarchy("TOP(M)::forward.act(SiLU)::forward.::silu.") == [Level("TOP", "M"), Level("act", "SiLU")]
    assert parse_hierarchy("") == [] and parse_hierarchy("not a hierarchy") == []
    assert parse_hierarchy("TOP(M)::forward.junk") == []


def _scopes_of_ops(traced: Any, tmp_path: Path, depth: int) -> dict[str, set[tuple[str, str | None]]]:
    """op name -> the (layer, child) its hierarchies resolve to, over one profiled call."""
    path, _ = _profile(traced, tmp_path, iterations=1)
    root, _ = layer_root(traced)
    scopes = layer_scopes(traced, root, depth)
    out: dict[str, set[tuple[str, str | None]]] = {}
    for event in json.loads(path.read_text())["traceEvents"]:
        hierarchy = event.get("args", {}).get(HIERARCHY_ARG)
        if event.get("cat") != "cpu_op" or hierarchy is None:
            continue
        scope = scopes.scope_of(hierarchy)
        out.setdefault(event["name"], set()).add((scope.layer, scope.child) if scope else ("", None))
    return out


def test_ops_resolve_to_their_layers_through_a_called_sequential(tmp_path: Path) -> None:
    found = _scopes_of_ops(_traced(Seq()), tmp_path, depth=2)
    assert found["aten::silu"] == {("model.1", "model.1.act"), ("model.2", "model.2.act")}
    convs = {layer for layer, _ in found["aten::_convolution"]}
    assert convs == {"model.0", "model.1", "model.2"}
    assert ("model.0", None) in found["aten::_convolution"]  # a Conv2d layer has no children
    assert found["forward"] == {("", None)}  # TorchScript's own range around the forward: no layer


def test_a_scripted_model_resolves_as_a_traced_one(tmp_path: Path) -> None:
    scripted = torch.jit.script(Seq().eval())
    found = _scopes_of_ops(scripted, tmp_path, depth=2)
    assert found["aten::silu"] == {("model.1", "model.1.act"), ("model.2", "model.2.act")}
    assert {layer for layer, _ in found["aten::conv2d"]} == {"model.0", "model.1", "model.2"}


def test_iterated_layers_shared_modules_and_ambiguous_containers(tmp_path: Path) -> None:
    found = _scopes_of_ops(_traced(Yolo()), tmp_path, depth=2)
    # the layer list is iterated, not called: its level is absent and the layers are found by their names
    assert {layer for layer, _ in found["aten::_convolution"]} == {"model.0", "model.1", "model.2"}
    # the shared SiLU (INSTANCE_NAME_UNKNOWN) is found by its class among its parent's children
    assert found["aten::silu"] == {("model.0", "model.0.act"), ("model.1", "model.1.act")}
    # cv2[i] and cv3[i] are both "i(Conv2d)" under the head: no child is guessed (the eager markers give the
    # never-called ModuleLists none either), the ops stay in their layer
    assert ("model.2", None) in found["aten::_convolution"]
    assert not any(child and child.startswith("model.2.") for _, child in found["aten::_convolution"])
    depth1 = _scopes_of_ops(_traced(Yolo()), tmp_path, depth=1)
    assert all(child is None for pairs in depth1.values() for _, child in pairs)


def test_a_wrapped_traced_model_is_found_below_the_eager_wrapper(tmp_path: Path) -> None:
    class Wrapper(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.model = inner

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.model(x)

    wrapper = Wrapper(_traced(Yolo()))
    root, _ = layer_root(wrapper)
    assert root is wrapper.model and is_scripted(root)
    scopes = layer_scopes(wrapper, root, 1)
    assert scopes.tops == ["model"]
    hit = scopes.scope_of("TOP(Yolo)::forward.1(Shared)::forward.conv(Conv2d)::forward.")
    assert hit is not None and (hit.layer, hit.index) == ("model.1", 1)
    assert scopes.scope_of("TOP(Other)::forward.1(Shared)::forward.") is None


@pytest.mark.parametrize(("depth", "from_warmup"), [(1, False), (2, False), (1, True), (2, True)])
def test_converted_trace_replays_layer_spans_inside_each_forward(tmp_path: Path, depth: int, from_warmup: bool) -> None:
    """The hierarchies recorded in the measured forwards, or in the warm-up forward alone and borrowed op by op."""
    traced = _traced(Yolo())
    path, sync = _profile(traced, tmp_path, iterations=3, with_modules=not from_warmup)
    warmup = load_kineto(_profile(traced, tmp_path, iterations=1, first=-1)[0]) if from_warmup else None
    root, _ = layer_root(traced)
    scopes = layer_scopes(traced, root, depth)
    converted = convert(load_kineto(path), sync, [], shapes=warmup, scopes=scopes, depth=depth)
    markers = converted.replayed
    assert markers and all(m.replayed and m.kind == "layer" and m.measured for m in markers)
    rows = list(enumerate(markers, 1))
    assert marker_order_fault("markers.jsonl", rows) is None
    forwards = {op.iteration: op for op in converted.ops if op.event.name == "forward"}
    for i in range(3):
        spans = _spans(m for m in markers if m.iteration == i)
        top = [s for s in spans if s[0].count(".") == 1]
        assert [s[0] for s in top] == ["model.0", "model.1", "model.2"]
        forward = forwards[i]
        assert all(forward.start <= b and e <= forward.start + forward.event.dur for _, b, e in spans)
        assert sum(e - b for _, b, e in top) <= forward.event.dur
        children = [s[0] for s in spans if s[0].count(".") == 2]
        assert children == (["model.0.conv", "model.0.act", "model.1.conv", "model.1.act"] if depth == 2 else [])
    summary = converted.summary.module_layers
    assert summary is not None and summary.layer_spans == len(markers) // 2
    assert summary.hierarchy_from == (FROM_WARMUP if from_warmup else FROM_MEASURED)
    assert summary.forwards_unmatched == 0
    # every forward op is charged to a layer but TorchScript's own `forward` range around them all
    assert summary.forward_ops == summary.ops_in_layers + 3
    assert converted.summary.forward_ops_outside_layers == 3
    layers = converted.metrics.layers
    assert {"model.0", "model.1", "model.2"} <= set(layers)
    assert all(layers[f"model.{i}"]["profiler_layer_ms"] > 0 for i in range(3))


def test_a_forward_of_another_model_resolves_to_no_layer(tmp_path: Path) -> None:
    """Aligned by op name with another model's warm-up forward, its ops take hierarchies of that model's modules,
    which name no layer of this one: nothing is charged, no span made."""
    traced = _traced(Yolo())
    path, sync = _profile(traced, tmp_path, iterations=2, with_modules=False)
    other = load_kineto(_profile(_traced(Seq()), tmp_path, iterations=1, first=-1)[0])  # another op sequence
    root, _ = layer_root(traced)
    converted = convert(load_kineto(path), sync, [], shapes=other, scopes=layer_scopes(traced, root, 1))
    summary = converted.summary.module_layers
    assert summary is not None and summary.forwards_aligned == 2 and summary.ops_in_layers == 0
    assert converted.replayed == []


def _spans(markers: Any) -> list[tuple[str, int, int]]:
    open_: dict[str, int] = {}
    out = []
    for m in markers:
        if m.phase == "B":
            open_[m.name] = m.t_ns
        else:
            out.append((m.name, open_.pop(m.name), m.t_ns))
    return sorted(out, key=lambda s: (s[1], -s[2]))


PROGRAM = '''
"""A user's program: yolov8n built from its YAML, traced with torch.jit.trace, called in a loop."""
import torch
from ultralytics.nn.tasks import DetectionModel

model = DetectionModel("yolov8n.yaml", verbose=False).eval()
model.model[-1].export = True  # one tensor out, as ultralytics' TorchScript export makes it
image = torch.rand(1, 3, 64, 64)
with torch.no_grad():
    traced = torch.jit.trace(model, image, check_trace=False)
    for _ in range(30):
        traced(image)
'''


@pytest.mark.slow
def test_collect_a_traced_program_gives_per_layer_times(tmp_path: Path, run_hwprof: Any) -> None:
    from hwprof.core.markers import read_markers
    from hwprof.core.spans import measured_spans

    (tmp_path / "prog.py").write_text(PROGRAM)
    args = ["collect", "--only", "torch_profiler,timing", "--iters", "3", "--warmup", "1", "--out", "run"]
    done = run_hwprof(*args, "--", "python", "prog.py")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = tmp_path / "run"
    rows = [line.split(",") for line in (run / "layers.csv").read_text().splitlines()]
    header, rows = rows[0], rows[1:]
    name, time_ms = header.index("name"), header.index("time_ms")
    assert [r[name] for r in rows] == [f"model.{i}" for i in range(23)]  # the names `--model yolov8n` uses
    times = [float(r[time_ms]) for r in rows]
    assert all(t > 0 for t in times)
    summary = json.loads((run / "summary.json").read_text())
    forward = next(r["p50_ms"] for r in summary["stages"]["rows"] if r["name"] == "forward")
    assert sum(times) <= forward * (1 + 1e-9)
    assert summary["layers"]["time_pass"] == "trace"
    # the spans themselves: replayed after the trace pass, inside each measured forward, adding up to less
    spans = measured_spans(read_markers(run / "passes" / "trace" / "markers.jsonl"))
    forwards = {s.iteration: s for s in spans if s.kind == "stage" and s.name == "forward"}
    layers = [s for s in spans if s.kind == "layer"]
    assert len(forwards) == 3 and len(layers) == 23 * 3
    for i, fwd in forwards.items():
        mine = [s for s in layers if s.iteration == i]
        assert all(fwd.start_ns <= s.start_ns and s.end_ns <= fwd.end_ns and s.dur_ns > 0 for s in mine)
        assert sum(s.dur_ns for s in mine) <= fwd.dur_ns
    result = json.loads((run / "passes" / "trace" / "result.json").read_text())
    module_layers = result["collectors"]["torch_profiler"]["summary"]["module_layers"]
    assert module_layers["layer_spans"] == 23 * 3 and module_layers["forwards_unmatched"] == 0
    assert module_layers["hierarchy_from"] == FROM_WARMUP  # with_modules in the warm-up forward only
    raw = json.loads((run / "passes" / "trace" / "torch_profiler.kineto.json").read_text())["traceEvents"]
    assert not any(HIERARCHY_ARG in e.get("args", {}) for e in raw)
    report = " ".join(done.stdout.split())
    assert "module hierarchy" in report and "[TorchScript]" in report
