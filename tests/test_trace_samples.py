"""CPU samples in the trace: Perfetto perf samples at their instants, and a trace that agrees with the report.

The kernels pass's perf samples are written as Perfetto's own `perf_sample` packets (interned
frames and callstacks, one per sample, on its thread), never as slices: a slice one sample period
long straddled layer boundaries on the pipeline thread, so Perfetto nested layers under samples.
Checked in Perfetto's trace processor (render/trace_processor.py) with the same queries as
scripts/check_trace_layers.py (render/trace_layers.py):
- every forward on every track that has layers has exactly the model's number of direct layer children;
- no layer slice has a parent other than a forward or a layer;
- per layer, the perf samples whose instant lies in its time ranges equal the report's sample count;
- py-spy's stack runs, still slices, never cross a layer boundary.

The fast tests build a kernels pass from real `perf script` output and markers of a real pass
(tests/fixtures/perf_sampling) through the collector's own conversion, next to the real
rundir_small run; the slow test runs a real default kernels pass and py-spy on yolov7-tiny.
"""

from __future__ import annotations

import gzip
import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest
from hwprof.collectors.perf_sampling.data_tables import convert
from hwprof.collectors.perf_sampling.script import parse_script

from hwprof.schema.records import StackSample, read_records
from hwprof.trace.layer_checks import LayerCheck, check_layers
from hwprof.trace.model import LEVEL_RECORD, Slice
from hwprof.trace.nesting import split_at
from hwprof.trace.perfetto import build_trace
from hwprof.trace.processor import TraceSession, availability
from hwprof.trace.samples import SAMPLES_SEQUENCE_ID, CallstackInterner
from hwprof.trace.tracks import build_timeline

FIXTURES = Path(__file__).parent / "fixtures"
RUNDIR = FIXTURES / "rundir_small"
PERF_FIXTURE = FIXTURES / "perf_sampling"


# ----------------------------------------------------------------------------- a kernels pass from real perf output


def _fake_perf(folder: Path) -> Path:
    """`perf script` answered with the fixture's recorded output (real lines of a real kernels pass)."""
    text = folder / "script.txt"
    with gzip.open(PERF_FIXTURE / "cpu_clock.script.txt.gz", "rt") as src:
        text.write_text(src.read())
    fake = folder / "perf"
    fake.write_text(f"#!/bin/sh\nexec cat '{text}'\n")
    fake.chmod(0o755)
    return fake


def make_run(root: Path) -> Path:
    """rundir_small (yolov8n at 256: timing, layers, trace with py-spy, scalene) plus a kernels pass of
    the same model whose records the perf sampling collector converts from real `perf script` output."""
    run_dir = root / "run"
    shutil.copytree(RUNDIR, run_dir)
    kernels = run_dir / "passes" / "kernels"
    kernels.mkdir()
    shutil.copy(PERF_FIXTURE / "cpu_clock.markers.jsonl", kernels / "markers.jsonl")
    shutil.copy(run_dir / "passes" / "layers" / "model.json", kernels / "model.json")
    fake = _fake_perf(root)
    with gzip.open(PERF_FIXTURE / "cpu_clock.script.txt.gz", "rt") as lines:
        pid = min(s.tid for s in parse_script(lines))
    convert(str(fake), kernels / "perf.data", kernels, 2000, pid)
    run = json.loads((run_dir / "run.json").read_text())
    run["passes"]["kernels"] = {"status": "ok", "pid": pid, "collectors": ["perf_sampling"]}
    run["collectors"]["perf_sampling"] = {"status": "ok", "pass": "kernels"}
    (run_dir / "run.json").write_text(json.dumps(run))
    (kernels / "result.json").write_text(json.dumps({"pid": pid, "collectors": {"perf_sampling": {"status": "ok"}}}))
    return run_dir


@pytest.fixture(scope="module")
def sampled_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    run_dir = make_run(tmp_path_factory.mktemp("samples"))
    return run_dir, build_trace(run_dir)


def _check(run_dir: Path) -> LayerCheck | None:
    state = availability()
    if not state.available:
        message = f"Perfetto trace processor {state.sentence()}: trace-processor checks of {run_dir} not run"
        print(message)
        warnings.warn(message, stacklevel=2)
        return None
    with TraceSession(run_dir / "trace.pftrace") as tp:
        result = check_layers(tp, run_dir)
    print("\n".join(result.lines()))
    return result


def test_samples_are_written_as_records_at_their_instants(sampled_run: tuple[Path, Any]) -> None:
    run_dir, _ = sampled_run
    rows = list(read_records(run_dir / "passes" / "kernels" / "perf_sampling.records.jsonl"))
    samples = [r for r in rows if isinstance(r, StackSample)]
    with gzip.open(PERF_FIXTURE / "cpu_clock.script.txt.gz", "rt") as lines:
        perf = list(parse_script(lines))
    assert len(samples) == len(perf), "every sample perf recorded, none merged into a span"
    assert sorted((s.tid, s.ts_ns) for s in samples) == sorted((s.tid, s.t_ns) for s in perf)
    assert all(len(s.frames) == 1 and s.frames[0][0] and s.frames[0][1] for s in samples)
    assert not any(getattr(r, "category", "") == "perf" for r in rows), "no sample is a span any more"


def test_the_trace_holds_one_perf_sample_packet_per_sample(sampled_run: tuple[Path, Any]) -> None:
    """From the packets themselves (no trace processor): pid, tid, instant and a callstack whose frame
    names the kernel the record names."""
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    run_dir, stats = sampled_run
    records = [r for r in read_records(run_dir / "passes" / "kernels" / "perf_sampling.records.jsonl")]
    samples = [r for r in records if isinstance(r, StackSample)]
    trace = pb.Trace()
    trace.ParseFromString((run_dir / "trace.pftrace").read_bytes())
    names: dict[int, str] = {}
    frames: dict[int, int] = {}
    stacks: dict[int, list[int]] = {}
    got = []
    for p in trace.packet:
        names.update({n.iid: n.str.decode() for n in p.interned_data.function_names})
        frames.update({f.iid: f.function_name_id for f in p.interned_data.frames})
        stacks.update({c.iid: list(c.frame_ids) for c in p.interned_data.callstacks})
        if p.HasField("perf_sample"):
            assert p.trusted_packet_sequence_id == SAMPLES_SEQUENCE_ID
            leaf = names[frames[stacks[p.perf_sample.callstack_iid][-1]]]
            got.append((p.timestamp, p.perf_sample.tid, p.perf_sample.pid, leaf))
    pid = json.loads((run_dir / "run.json").read_text())["passes"]["kernels"]["pid"]
    assert stats.perf_samples == len(samples) == len(got)
    assert sorted(got) == sorted((s.ts_ns, s.tid, pid, s.frames[-1][0]) for s in samples)
    assert len(stacks) < len(samples) / 10, "callstacks are interned, not written per sample"


def test_the_trace_agrees_with_the_report_in_the_trace_processor(sampled_run: tuple[Path, Any]) -> None:
    run_dir, _ = sampled_run
    result = _check(run_dir)
    if result is None:
        return
    assert result.forwards_ok, result.lines()
    assert result.bad_parents == [], result.lines()
    assert result.perf_samples > 1000
    assert result.layers_compared == result.model_layers == 23, "every layer of yolov8n has samples"
    assert result.layer_mismatches == [], result.lines()
    assert result.stack_slices > 0 and result.stack_slices_across_layers == 0, result.lines()
    assert result.ok


def test_samples_sit_on_their_own_threads_with_their_kernels(sampled_run: tuple[Path, Any]) -> None:
    run_dir, _ = sampled_run
    if not availability().available:
        pytest.skip(f"trace processor {availability().sentence()}")
    with TraceSession(run_dir / "trace.pftrace") as tp:
        threads = tp.query(
            """
            select t.tid, t.name, count(*) as n from perf_sample ps join thread t using (utid)
            group by t.tid order by t.tid
            """
        )
        top = tp.query(
            """
            select f.name from perf_sample ps join stack_profile_callsite c on c.id = ps.callsite_id
            join stack_profile_frame f on f.id = c.frame_id group by f.name order by count(*) desc limit 3
            """
        )
        perf_slices = tp.query("select count(*) as n from slice where category = 'perf'")[0]["n"]
    assert len(threads) == 2 and threads[0]["name"].startswith("main"), threads
    assert "worker" in threads[1]["name"], "torch's OpenMP worker has its own samples"
    assert any(r["name"].startswith("jit_") for r in top), top
    assert perf_slices == 0


# ----------------------------------------------------------------------------- pieces


def test_split_at_cuts_a_stack_run_at_every_boundary_inside_it() -> None:
    runs = [
        Slice(0, 10, "a", "py-spy", LEVEL_RECORD, {"stack": ("x",), "samples": 3}),
        Slice(10, 14, "b", "py-spy", LEVEL_RECORD, {"stack": ("y",)}),
    ]
    out = split_at(runs, [0, 4, 7, 10, 12, 20])
    pieces = [(s.start, s.end, s.name) for s in out]
    assert pieces == [(0, 4, "a"), (4, 7, "a"), (7, 10, "a"), (10, 12, "b"), (12, 14, "b")]
    assert all("samples" not in s.args and s.args["stack"] for s in out), "a split run's count is dropped"
    whole = Slice(4, 7, "c", "py-spy", LEVEL_RECORD, {"samples": 2})
    assert split_at([whole], [0, 4, 7]) == [whole], "a run inside one layer stays as it is"


def test_callstacks_intern_frames_and_stacks_once() -> None:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    interner = CallstackInterner()
    a = (("jit_conv", "oneDNN JIT"),)
    b = (("jit_reorder", "oneDNN JIT"),)
    c = (("forward", "python"), ("jit_conv", "oneDNN JIT"))
    ids = [interner.callstack(s) for s in (a, b, a, c)]
    assert ids == [1, 2, 1, 3]
    packet = pb.TracePacket()
    interner.flush(packet)
    data = packet.interned_data
    assert [m.str.decode() for m in data.mapping_paths] == ["oneDNN JIT", "python"]
    assert len(data.frames) == 3, "jit_conv is one frame in both stacks"
    jit = [f for f in data.frames if f.mapping_id == 1]
    assert len({f.function_name_id for f in jit}) == 2, "two functions of one mapping, two frames"
    assert list(data.callstacks[2].frame_ids) == [3, 1], "root first"
    again = pb.TracePacket()
    interner.callstack(a)
    interner.flush(again)
    assert not again.HasField("interned_data"), "nothing is interned twice"


def test_the_timeline_keeps_samples_as_instants(sampled_run: tuple[Path, Any]) -> None:
    run_dir, _ = sampled_run
    timeline = build_timeline(run_dir)
    kernels = next(p for p in timeline.passes if p.name == "kernels")
    assert kernels.samples and all(a.ts <= b.ts for a, b in zip(kernels.samples, kernels.samples[1:], strict=False))
    tids = {t.tid for t in kernels.slice_tracks if t.tid is not None}
    assert {s.tid for s in kernels.samples} <= tids, "every sampled thread has a named thread track"
    assert not any(s.category == "perf" for t in kernels.slice_tracks for s in t.slices)
    assert any("perf sample" in note for note in timeline.notes)


def test_perf_script_lines_with_the_cpu_field_parse() -> None:
    line = "python  2460 [001]   337.512430117:     250000 cpu-clock:  7f230ef8a1c4 jit_kernel_t.0 (/tmp/perf-2453.map)"
    (sample,) = parse_script([line])
    assert (sample.tid, sample.cpu, sample.t_ns, sample.period) == (2460, 1, 337_512_430_117, 250000)
    (old,) = parse_script([line.replace(" [001]", "")])
    assert old.cpu is None and old.tid == 2460


# ----------------------------------------------------------------------------- a real run


@pytest.mark.slow
def test_real_kernels_pass_trace_agrees_with_its_report(run_hwprof: Any, tmp_path: Path) -> None:
    """A real default kernels pass (and py-spy) on yolov7-tiny at 160: the trace `collect` wrote
    passes the checks in the trace processor."""
    out = tmp_path / "run"
    args = ["--model", "yolov7-tiny", "--imgsz", "160", "--warmup", "1", "--iters", "30", "--out", str(out)]
    # py-spy at 250 Hz (default 50) so that its few short forwards give it stacks inside layers; perf at 1 kHz over
    # the 30 iterations, not the auto plan's 60 s of forwards (tests/test_perf_sampling.py tests the plan)
    only = ["--only", "timing,perf_sampling,pyspy", "--pyspy-rate", "250", "--perf-rate", "1000"]
    proc = run_hwprof("collect", *args, *only, "--no-report", timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    run = json.loads((out / "run.json").read_text())
    assert run["collectors"]["perf_sampling"]["status"] == "ok", run["collectors"]["perf_sampling"]
    result = _check(out)
    if result is None:
        return
    assert result.model_layers == 78
    assert result.forwards_ok, result.lines()
    assert result.bad_parents == [], result.lines()
    assert result.layers_compared > 50 and result.layer_mismatches == [], result.lines()
    assert result.stack_slices > 0 and result.stack_slices_across_layers == 0, result.lines()
    assert result.perf_samples >= run["collectors"]["perf_sampling"]["summary"]["samples_measured"]
