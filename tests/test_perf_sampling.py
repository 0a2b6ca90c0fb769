"""perf sampling in the kernels pass: parsing real `perf script` output, kernel names, attribution
to stage > layer by time, the sampling plan, the worker/parent FIFO handshake, and real runs that
are cross-checked against `perf report --time` on the same perf.data."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hwprof.collectors.base import Capability
from hwprof.collectors.perf_sampling import access, demangle
from hwprof.collectors.perf_sampling import collector as ps
from hwprof.collectors.perf_sampling import control as ctl
from hwprof.collectors.perf_sampling import rate as ps_rate
from hwprof.collectors.perf_sampling.data_tables import code_of, is_named, read_samples
from hwprof.collectors.perf_sampling.script import (
    KIND_ATEN,
    KIND_BLAS,
    KIND_JIT,
    KIND_KERNEL,
    KIND_OPENMP,
    OPENMP_LABEL,
    Sample,
    classify,
    finish_counts,
    parse_script,
    short_name,
)

from hwprof.core.config import RunConfig
from hwprof.core.kernels import BETWEEN_LAYERS, KINDS, attribute, derived, tables_dict
from hwprof.core.markers import read_markers
from hwprof.core.spans import measured_pieces, measured_spans
from hwprof.schema.probes import PerfSamplingProbe
from hwprof.schema.records import StackSample, read_records

FIXTURE = Path(__file__).parent / "fixtures" / "perf_sampling"
PERF = shutil.which("perf")
NO_PMU = Capability.ok(details=PerfSamplingProbe.of(pmu=False, user_only=False))
"""A probe that found perf sampling cpu-clock of user and kernel space."""


def _samples(name: str) -> list[Sample]:
    with gzip.open(FIXTURE / f"{name}.script.txt.gz", "rt") as lines:
        samples = list(parse_script(lines))
    finish_counts(samples)
    return samples


def _lines(name: str) -> list[str]:
    with gzip.open(FIXTURE / f"{name}.script.txt.gz", "rt") as lines:
        return [line for line in lines if line.strip()]


# ----------------------------------------------------------------------------- parsing


def test_every_line_of_a_cpu_clock_recording_is_one_sample() -> None:
    lines = _lines("cpu_clock")
    samples = _samples("cpu_clock")
    assert len(samples) == len(lines)
    assert {s.event for s in samples} == {"cpu-clock"}
    assert all(s.counts == {} for s in samples)
    first = lines[0].split()
    assert samples[0].tid == int(first[1])
    seconds, frac = first[2].rstrip(":").split(".")
    assert samples[0].t_ns == int(seconds) * 10**9 + int(frac)
    assert len({s.tid for s in samples}) == 2, "the pipeline thread and torch's OpenMP worker"


def test_a_group_recording_merges_member_lines_into_one_sample_with_counts() -> None:
    lines = _lines("group")
    samples = _samples("group")
    leaders = [line for line in lines if " cpu-clock: " in line]
    assert len(samples) == len(leaders)
    for event in ("context-switches", "page-faults"):
        in_text = sum(int(line.split()[3]) for line in lines if f" {event}: " in line)
        assert in_text > 0
        assert sum(s.counts.get(event, 0) for s in samples) == in_text
    assert sum(s.counts["cpu-clock"] for s in samples) == sum(s.period for s in samples)


def test_symbols_with_parentheses_keep_their_library() -> None:
    line = (
        "python  2460   337.512430117:     250000 cpu-clock:      7f22fa9be681 "
        "at::native::(anonymous namespace)::cpu_max_pool<float, false>(at::Tensor const&) "
        "(/x/torch/lib/libtorch_cpu.so)"
    )
    (s,) = parse_script([line])
    assert s.sym.endswith("(at::Tensor const&)") and s.dso == "/x/torch/lib/libtorch_cpu.so"
    assert (s.tid, s.t_ns, s.period, s.ip) == (2460, 337_512_430_117, 250000, 0x7F22FA9BE681)


def test_the_recording_names_jit_kernels_and_labels_the_openmp_runtime() -> None:
    codes = Counter(code_of(s) for s in _samples("cpu_clock"))
    names = {c.name for c in codes}
    kinds = {c.kind for c in codes}
    assert any(n.startswith("jit_avx512") for n in names), "oneDNN JIT kernels named through the perf map"
    assert not any(re.search(r"\.\d+$", n) for n in names if n.startswith("jit_")), "perf's .N suffix dropped"
    assert {KIND_JIT, KIND_OPENMP, KIND_BLAS} <= kinds
    assert OPENMP_LABEL in names


@pytest.mark.parametrize(
    ("sym", "dso", "ip", "name", "kind"),
    [
        ("jit_uni_reorder_kernel_f32.2", "/tmp/perf-2453.map", 0x7F00, "jit_uni_reorder_kernel_f32", KIND_JIT),
        ("jit_x.7", "[JIT] tid 7754", 0x7F00, "jit_x", KIND_JIT),
        ("[unknown]", "/t/torch/lib/libgomp.so.1", 0x7F00, OPENMP_LABEL, KIND_OPENMP),
        ("clear_page_erms", "[kernel.kallsyms]", 0xFFFFFFFF821EB0E7, "clear_page_erms", KIND_KERNEL),
        ("mkl_blas_def_sgemm_kernel_0_zen", "/t/libtorch_cpu.so", 1, "mkl_blas_def_sgemm_kernel_0_zen", KIND_BLAS),
        (
            "at::native::add_kernel(at::TensorIteratorBase&)",
            "/t/libtorch_cpu.so",
            1,
            "at::native::add_kernel(…)",
            KIND_ATEN,
        ),
    ],
)
def test_classify(sym: str, dso: str, ip: int, name: str, kind: str) -> None:
    code = classify(sym, dso, ip)
    assert (code.name, code.kind) == (name, kind)


def test_aten_parallel_regions_are_named_by_the_operation_inside() -> None:
    silu = (
        "c10::function_ref<void (char**, long const*, long, long)>::callback_fn<at::native::AVX512::"
        "VectorizedLoop2d<at::native::(anonymous namespace)::silu_kernel(at::TensorIteratorBase&)::{lambda()#2}"
        "::operator()() const::{lambda(float)#1}> >"
    )
    assert short_name(silu) == "at::native::silu_kernel [VectorizedLoop2d]"
    pool = (
        "at::internal::invoke_parallel<at::parallel_for<at::native::(anonymous namespace)::cpu_max_pool<float, "
        "false>(at::Tensor const&)::{lambda(long, long)#1}>(long, long, long)::{lambda(long, long)#1}>"
    )
    assert short_name(pool) == "at::native::cpu_max_pool [parallel body]"
    assert not is_named("[unknown in libc]") and not is_named(OPENMP_LABEL) and is_named("memcpy")


# ----------------------------------------------------------------------------- attribution


def _tables(name: str) -> tuple[Any, list[Sample], list[Any]]:
    samples = _samples(name)
    pieces = measured_pieces(read_markers(FIXTURE / f"{name}.markers.jsonl"))
    return attribute(samples, code_of, pieces), samples, pieces


def test_samples_are_charged_to_the_stage_and_layer_running_at_their_time() -> None:
    tables, samples, _ = _tables("cpu_clock")
    spans = measured_spans(read_markers(FIXTURE / "cpu_clock.markers.jsonl"))
    forward = [(s.start_ns, s.end_ns) for s in spans if s.kind == "stage" and s.name == "forward"]
    in_forward = [x for x in samples if any(a <= x.t_ns < b for a, b in forward)]
    assert tables.forward.samples == len(in_forward) > 500
    assert sum(b.samples for b in tables.layers.values()) == tables.forward.samples
    assert sum(b.samples for b in tables.stages.values()) + tables.outside == len(samples)
    layer = max((n for n in tables.layers if n != BETWEEN_LAYERS), key=lambda n: tables.layers[n].samples)
    windows = [(s.start_ns, s.end_ns) for s in spans if s.kind == "layer" and s.name == layer]
    assert tables.layers[layer].samples == sum(any(a <= x.t_ns < b for a, b in windows) for x in samples)
    assert len(tables.layers[layer].threads) == 2, "both threads' samples belong to the layer"


def test_tables_dict_reports_shares_that_add_up_and_flags_thin_layers() -> None:
    tables, _, _ = _tables("cpu_clock")
    doc = tables_dict(tables, [], KINDS)
    fwd = doc["forward"]
    assert sum(fwd["kinds"].values()) == pytest.approx(1.0)
    assert sum(k["share"] for k in doc["kernels"]) == pytest.approx(1.0)
    for row in doc["kernels"][:5]:
        assert sum(share for _, share in row["layers"]) == pytest.approx(1.0)
    thin = [n for n, r in doc["layers"].items() if n != BETWEEN_LAYERS and r["share_of_forward"] >= 0.01]
    few = [n for n in thin if doc["layers"][n]["samples"] < doc["min_samples"]]
    assert sorted(few) == doc["layers_with_too_few_samples"]
    assert "cpi" not in fwd, "no cycles or instructions were counted"


def test_group_counts_reach_the_tables() -> None:
    tables, _, _ = _tables("group")
    doc = tables_dict(tables, ["cpu-clock", "context-switches", "page-faults"], KINDS)
    in_forward = sum(b.counts[""]["context-switches"] for b in tables.layers.values())
    assert doc["forward"]["counts"]["context-switches"] == in_forward > 0


def test_cpi_and_mpki_come_only_from_counted_cycles_and_instructions() -> None:
    counts = {"cycles": 3000, "instructions": 2000, "cache-misses": 10}
    assert derived(counts, list(counts)) == {"cpi": 1.5, "cache_misses_pki": 5.0}
    assert derived({"cycles": 3000}, ["cycles"]) == {}
    assert derived({}, []) == {}


# ----------------------------------------------------------------------------- plan and events


def test_the_plan_keeps_the_rate_low_and_adds_iterations_for_a_short_forward() -> None:
    config = RunConfig(iters=20, threads=1)
    slow = ps_rate.plan_sampling(config, 1.0)
    assert slow.iterations == 20 and ps_rate.MIN_AUTO_RATE <= slow.rate <= ps_rate.MAX_AUTO_RATE
    assert slow.rate * 0.01 * 1.0 * slow.iterations >= 50
    fast = ps_rate.plan_sampling(config, 0.040)
    assert fast.rate == ps_rate.MAX_AUTO_RATE and fast.iterations > 20
    assert fast.rate * 0.01 * 0.040 * fast.iterations >= 50
    # each of torch's threads is sampled at the rate: four threads need a quarter of the iterations
    four = ps_rate.plan_sampling(RunConfig(iters=20, threads=4), 0.040)
    assert four.rate == fast.rate and four.iterations == pytest.approx(fast.iterations / 4, abs=1)
    assert four.rate * 0.01 * 0.040 * four.iterations * 4 >= 50 and "on 4 threads" in four.how
    tiny = ps_rate.plan_sampling(config, 0.0001)
    assert tiny.iterations * 0.0001 * ps_rate.PAIRED <= ps_rate.MAX_PASS_S + 1e-9  # with the clean twins
    # a video run (decode, annotate, encode) or a program's own work: the cap counts whole iterations
    video = ps_rate.plan_sampling(config, 0.040, 0.400)
    assert video.iterations * 0.400 * ps_rate.PAIRED <= ps_rate.MAX_PASS_S + 1e-9 < fast.iterations * 0.400
    assert "400.0 ms iterations" in video.how and "iterations" not in fast.how.split("at most")[1]
    chosen = ps_rate.plan_sampling(RunConfig(iters=7, perf_rate=123), 0.040)
    assert (chosen.rate, chosen.iterations, chosen.how) == (123, 7, "--perf-rate")


def test_without_iters_the_plan_starts_from_the_resolving_floor_and_raises_the_rate_first() -> None:
    """A collect without --iters: the kernels pass plans from RESOLVING_BASE measured iterations, not --iters'
    default 20: a long forward (yolov7 at 640, 0.69 s, 2 threads) gets the same samples from fewer iterations at a
    higher rate; a short one still gets the iterations it needs."""
    fixed = RunConfig(iters=20, threads=2)
    resolving = RunConfig(iters=20, threads=2, extra={"timing_resolve": True})
    before, after = ps_rate.plan_sampling(fixed, 0.69), ps_rate.plan_sampling(resolving, 0.69)
    assert before.iterations == 20 and ps_rate.RESOLVING_BASE <= after.iterations == 10 < before.iterations
    assert after.rate > before.rate and after.rate * 0.01 * 0.69 * 2 * after.iterations >= ps_rate.RATE_MARGIN * 50
    assert f"at least {ps_rate.RESOLVING_BASE}," in after.how and "at least --iters" in before.how
    short = ps_rate.plan_sampling(resolving, 0.040)
    assert short.rate == ps_rate.MAX_AUTO_RATE and short.rate * 0.01 * 0.040 * 2 * short.iterations >= 50
    assert ps_rate.plan_sampling(RunConfig(iters=5, extra={"timing_resolve": True}), 0.69).iterations >= 5


def _layers_pass(run_dir: Path, layers: dict[str, float]) -> None:
    """A layers pass's markers: three iterations (the second clean) whose layers take these shares of a 10 ms
    forward."""
    from hwprof.core.markers import Marker

    forward = 10_000_000
    rows: list[Marker] = []
    for it, clean in ((0, False), (1, True), (2, False)):
        t = it * 100_000_000
        rows += [Marker("iteration", "B", "iteration", t, it, False, clean=clean)]
        rows += [Marker("stage", "B", "forward", t + 1, it, False, clean=clean)]
        at = t + 1
        for name, share in layers.items():
            end = at + int(share * forward)
            if not clean:  # a clean iteration has no layer markers
                rows += [Marker("layer", "B", name, at, it, False), Marker("layer", "E", name, end, it, False)]
            at = end
        rows += [Marker("stage", "E", "forward", t + 1 + forward, it, False, clean=clean)]
        rows += [Marker("iteration", "E", "iteration", t + 2 + forward, it, False, clean=clean)]
    layers_pass = run_dir / "passes" / "layers"
    layers_pass.mkdir(parents=True)
    (layers_pass / "markers.jsonl").write_text("".join(json.dumps(m.to_row()) + "\n" for m in rows))


def test_the_plan_is_sized_for_the_smallest_layer_the_layers_pass_ranks(tmp_path: Path) -> None:
    """A layers pass whose smallest layer at or above 1% of the forward takes 2.5% (and one below it, 0.5%, left
    out): the plan asks for 2.5x fewer iterations than for a layer at exactly 1% (less its wider margin), and says
    why."""
    _layers_pass(tmp_path, {"model.0": 0.6, "model.1": 0.025, "model.2": 0.005})
    smallest = ps_rate.smallest_ranked_share(tmp_path)
    assert smallest == pytest.approx(0.025, rel=1e-6)
    assert ps_rate.smallest_ranked_share(tmp_path / "no-layers-pass") is None
    config = RunConfig(iters=20, threads=1)
    at_one, at_smallest = ps_rate.plan_sampling(config, 0.040), ps_rate.plan_sampling(config, 0.040, None, smallest)
    assert at_smallest.rate == at_one.rate
    margins = ps_rate.SHARE_MARGIN / ps_rate.RATE_MARGIN  # measured shares: a wider margin
    assert at_smallest.iterations == pytest.approx(at_one.iterations * margins / 2.5, abs=1)
    assert at_smallest.rate * smallest * 0.040 * at_smallest.iterations >= ps_rate.SHARE_MARGIN * 50 - 1
    assert "smallest of the 15 largest layers at or above 1% of the layers pass's forward (2.5%)" in at_smallest.how

    for share in (0.004, 0.011):  # never sized for a layer below 1%, never more than the plan for one at 1%
        assert ps_rate.plan_sampling(config, 0.040, None, share).iterations == at_one.iterations


def test_only_the_layers_the_report_ranks_size_the_plan(tmp_path: Path) -> None:
    """17 layers at or above 1% (5.0% down to 1.8%): the plan is sized for the 15th largest (2.2%), the smallest the
    report ranks, not for the 17th."""
    from hwprof.core.kernels import RANKED_LAYERS

    assert RANKED_LAYERS == 15
    _layers_pass(tmp_path, {f"model.{i}": 0.05 - 0.002 * i for i in range(17)})
    assert ps_rate.smallest_ranked_share(tmp_path) == pytest.approx(0.05 - 0.002 * 14, rel=1e-6)


def test_sampling_events_follow_the_pmu_and_the_paranoia() -> None:
    no_pmu = PerfSamplingProbe.of(pmu=False, user_only=False)
    assert access.sampling_events(RunConfig(), no_pmu) == ["cpu-clock"]
    assert access.sampling_events(RunConfig(events=["page-faults", "cycles"]), no_pmu) == ["{cpu-clock,page-faults}:S"]
    pmu = PerfSamplingProbe.of(pmu=True, user_only=True)
    group = access.sampling_events(RunConfig(events=["LLC-load-misses"]), pmu)
    assert group == ["{cycles:u,instructions:u,cache-misses:u,LLC-load-misses:u}:S"]


def test_without_perf_the_collector_is_unavailable_with_the_install_fix(tmp_path: Path) -> None:
    cap = ps.PerfSamplingCollector.probe(RunConfig(extra={"perf_path": str(tmp_path / "no-perf")}))
    assert not cap.available and "apt-get install linux-perf" in cap.fix and "dnf install perf" in cap.fix


# ----------------------------------------------------------------------------- FIFO handshake


def test_a_worker_without_perf_measures_on_at_once(tmp_path: Path) -> None:
    assert ctl.request_attach(tmp_path) is False
    ctl.make_fifos(tmp_path)
    (tmp_path / ctl.READY_FIFO).unlink()
    assert ctl.request_attach(tmp_path) is False, "no perf.ready: no perf tool in this run"
    assert ctl.disable(tmp_path) is False


def test_the_parent_launches_when_the_worker_asks_and_answers_go(tmp_path: Path) -> None:
    ctl.make_fifos(tmp_path)
    launched = threading.Event()

    def launch() -> bool:
        launched.set()
        return True

    server = ctl.AttachOnRequest(tmp_path, launch)
    time.sleep(0.05)
    assert ctl.request_attach(tmp_path, timeout_s=10) is True
    assert launched.is_set() and server.requested and server.launched
    server.cancel()
    assert not server.thread.is_alive()


def test_cancel_releases_a_parent_whose_worker_never_asked(tmp_path: Path) -> None:
    ctl.make_fifos(tmp_path)
    server = ctl.AttachOnRequest(tmp_path, lambda: pytest.fail("must not launch"))
    time.sleep(0.05)
    server.cancel()
    assert not server.thread.is_alive() and not server.requested


# ----------------------------------------------------------------------------- real runs


def _pmu_counts() -> tuple[bool, str]:
    if PERF is None:
        return False, "perf is not installed"
    return access.pmu_status(PERF)


@pytest.fixture(scope="module")
def default_plan_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """One real timing + kernels pass with the default sampling plan (yolov8n at 256, 3 iterations), made in this
    module's own phase and read by both real tests (they made the same collect each)."""
    folder = tmp_path_factory.mktemp("default-plan")
    out = folder / "run"
    args = ["--model", "yolov8n", "--imgsz", "256", "--warmup", "1", "--out", str(out), "--no-report"]
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "hwprof", "collect", *args, "--iters", "3", "--only", "timing,perf_sampling"],
        cwd=folder, text=True, capture_output=True, timeout=900, env={**os.environ, "COLUMNS": "120"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return out, json.loads((out / "run.json").read_text())


def _report_shares(data: Path, windows: list[tuple[int, int]]) -> dict[str, float]:
    """`perf report --time` over the windows, by hwprof's kernel names: the peer tool's shares."""
    assert PERF is not None
    ranges = " ".join(f"{a / 1e9:.9f},{b / 1e9:.9f}" for a, b in windows)
    command = [PERF, "report", "-i", str(data), "--time", ranges, "--sort", "dso,sym", "--stdio", "--no-children"]
    command += ["-g", "none"]  # the leaves only: perf.data holds callchains
    done = subprocess.run([*command, "-q", "-n"], capture_output=True, text=True, timeout=300, check=True)
    shares: dict[str, float] = {}
    for line in done.stdout.splitlines():
        match = re.match(r"^\s*([\d.]+)%\s+(\d+)\s+(.+?)\s+\[([.k])\]\s+(.*)$", line)
        if match is None:
            continue
        pct, _, dso, space, sym = match.groups()
        sym = "[unknown]" if re.fullmatch(r"0x[0-9a-f]+", sym.strip()) else sym.strip()
        code = classify(sym, "[kernel.kallsyms]" if space == "k" else dso.strip(), 0)
        shares[code.name] = shares.get(code.name, 0.0) + float(pct) / 100
    return shares


def _check_trace(trace: Path, run_dir: Path) -> None:
    """The samples in Perfetto's own trace processor: perf samples on both threads, each with the CPU
    it ran on and its kernel as a frame, no import errors, and each layer's samples as the tables count them."""
    from hwprof.trace.layer_checks import check_layers
    from hwprof.trace.processor import TraceSession, availability

    state = availability()
    if not state.available:
        pytest.skip(f"trace processor: {state.reason}")
    with TraceSession(trace) as tp:
        assert tp.query("select name from stats where value > 0 and severity in ('error', 'data_loss')") == []
        threads = tp.query(
            """
            select t.tid, count(*) as n, count(ps.callsite_id) as stacks
            from perf_sample ps join thread t using (utid) group by t.tid
            """
        )
        assert len(threads) == 2 and all(r["n"] > 0 and r["stacks"] == r["n"] for r in threads), threads
        records = read_records(run_dir / "passes" / "kernels" / "perf_sampling.records.jsonl")
        cpus = {r.cpu for r in records if isinstance(r, StackSample)}
        assert None not in cpus, "perf recorded the CPU of every sample (--sample-cpu)"
        assert {r["cpu"] for r in tp.query("select distinct cpu from perf_sample")} == cpus
        assert tp.query("select count(*) as n from slice where category = 'perf'")[0]["n"] == 0
        result = check_layers(tp, run_dir)
        assert result.ok, "\n".join(result.lines())


@pytest.mark.slow
@pytest.mark.skipif(PERF is None, reason="perf is not installed (Debian: apt-get install linux-perf)")
def test_real_kernels_pass_agrees_with_perf_report(
    run_hwprof: Any, default_plan_run: tuple[Path, dict[str, Any]]
) -> None:
    """A real timing + kernels pass with the default sampling plan (every layer above 1% of forward
    gets 50 samples); for the three most sampled layers, the kernel shares hwprof computed agree
    with `perf report --time` over the same layer windows of the same perf.data."""
    out, run = default_plan_run
    result = run["collectors"]["perf_sampling"]
    assert result["status"] == "ok", result
    summary = result["summary"]
    assert summary["iterations"] > 3, "the plan adds iterations for a short forward"
    # planned for 50 x 1.3 from the timing pass's forward; on a loaded host the kernels pass can run
    # faster than the timing pass did, and then collects proportionally fewer
    assert summary["layer_samples_min"] >= 30, summary
    assert summary["forward_labelled_share"] > 0.9
    assert summary["jit_perf_map"] is True
    assert summary["callchains"] is True and "--call-graph fp" in summary["command"]
    kernels_pass = out / "passes" / "kernels"
    doc = json.loads((kernels_pass / "perf_sampling.kernels.json").read_text())
    assert any(k["kind"] == KIND_JIT for k in doc["kernels"]), "oneDNN JIT kernels named"
    assert doc["callchains"] is True
    kernel = doc["forward"]["kinds"].get(KIND_KERNEL, 0.0)
    causes = doc["forward"].get("kernel_causes", [])
    assert sum(c["share"] for c in causes) == pytest.approx(kernel)
    assert doc["forward"].get("kernel_by_leaf", 0.0) <= 0.1 * kernel, "kernel samples carry their callchains"

    jit_map = next(kernels_pass.glob("perf-*.map"))
    tmp_map = Path("/tmp") / jit_map.name
    assert not tmp_map.exists(), "the collect leaves no perf map of its worker in /tmp (the run keeps a copy)"
    shutil.copy(jit_map, tmp_map)  # where perf report looks for it
    spans = measured_spans(read_markers(kernels_pass / "markers.jsonl"))
    layers = sorted((n for n in doc["layers"] if n != BETWEEN_LAYERS), key=lambda n: -doc["layers"][n]["samples"])[:3]
    for layer in layers:
        windows = [(s.start_ns, s.end_ns) for s in spans if s.kind == "layer" and s.name == layer]
        theirs = _report_shares(kernels_pass / "perf.data", windows)
        ours = {k["name"]: k["share"] for k in doc["layers"][layer]["kernels"]}
        for name, share in ours.items():
            if share >= 0.02:
                assert theirs.get(name, 0.0) == pytest.approx(share, abs=0.02), (layer, name, theirs)
    tmp_map.unlink()

    _check_trace(out / "trace.pftrace", out)
    layers_csv = (out / "layers.csv").read_text().splitlines()
    assert "perf_sampling.samples" in layers_csv[0] and "top_native_kernel" in layers_csv[0]
    report = run_hwprof("report", str(out))
    assert report.returncode == 0
    assert "kernels per layer (all threads)" in report.stdout


def test_perf_record_skips_bpf_events_where_perf_can(tmp_path: Path) -> None:
    """`--no-bpf-event` where `perf record -h` lists it (perf 6.1 here: 1.18 s to record `true`, 0.22 s with it),
    nothing where it does not (an older perf would refuse the option) or where perf cannot say."""
    for name, usage in (("new", "    --no-bpf-event    do not record bpf events"), ("old", "    -q, --quiet")):
        fake = tmp_path / name
        fake.write_text(f"#!/bin/sh\necho '{usage}' >&2\nexit 129\n")
        fake.chmod(0o755)
        assert access.record_flags(str(fake)) == (("--no-bpf-event",) if name == "new" else ())
    assert access.record_flags(str(tmp_path / "missing")) == ()
    if PERF is not None:
        assert access.record_flags(PERF) in ((), ("--no-bpf-event",))
        listed = "--no-bpf-event" in subprocess.run([PERF, "record", "-h"], capture_output=True, text=True).stderr
        assert (access.record_flags(PERF) == ("--no-bpf-event",)) == listed


@pytest.mark.slow
@pytest.mark.skipif(PERF is None, reason="perf is not installed (Debian: apt-get install linux-perf)")
def test_symbols_demangled_after_perf_script_are_the_names_perf_gives(
    default_plan_run: tuple[Path, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernels pass reads perf.data with `perf script --no-demangle` and demangles each symbol once with
    binutils' c++filt: the same leaf names as perf's own demangling (but where several symbols share an address,
    perf picks one of them by name, mangled or not, and where perf abbreviates a standard type, std::ostream, that
    c++filt spells out), and perf's own where c++filt is missing."""
    assert PERF is not None
    if demangle.cxxfilt() is None:
        pytest.skip("no c++filt (Debian: apt-get install binutils): perf demangles, as the next lines check")
    data = default_plan_run[0] / "passes" / "kernels" / "perf.data"
    ours, perfs = read_samples(PERF, data), read_samples(PERF, data, [])
    assert [(s.tid, s.t_ns, s.ip) for s in ours] == [(s.tid, s.t_ns, s.ip) for s in perfs]
    differ = {(a.sym, b.sym) for a, b in zip(ours, perfs, strict=True) if a.sym != b.sym}
    assert sum(a.sym != b.sym for a, b in zip(ours, perfs, strict=True)) <= 0.002 * len(ours), differ
    # the same function, its scope spelled otherwise: another lambda of one body, std::ostream spelled out by c++filt
    assert all(a.rsplit("::", 1)[-1] == b.rsplit("::", 1)[-1] for a, b in differ), differ
    assert any("dnnl::" in s.sym for s in ours)
    # what c++filt leaves mangled (a symbol of a JIT's perf map, a clone's suffix), perf leaves so too
    assert {s.sym for s in ours if s.sym.startswith("_Z")} <= {s.sym for s in perfs}
    monkeypatch.setattr(demangle.shutil, "which", lambda name: None)
    assert demangle.script_flags() == [] and demangle.demangled(["_ZN3foo3barEv"]) is None
    assert [s.sym for s in read_samples(PERF, data)] == [s.sym for s in perfs]


@pytest.mark.slow
@pytest.mark.skipif(not _pmu_counts()[0], reason=f"no hardware PMU here: {_pmu_counts()[1]}")
def test_real_cpi_per_kernel_where_the_pmu_counts(default_plan_run: tuple[Path, dict[str, Any]]) -> None:
    out, run = default_plan_run
    result = run["collectors"]["perf_sampling"]
    assert result["status"] == "ok", result
    assert {"cycles", "instructions"} <= set(result["summary"]["group_events"])
    doc = json.loads((out / "passes" / "kernels" / "perf_sampling.kernels.json").read_text())
    assert 0.1 < doc["forward"]["cpi"] < 20
    assert any("cpi" in k for k in doc["kernels"][:5])


def test_a_worker_that_never_measures_leaves_a_failed_result_and_no_perf(tmp_path: Path) -> None:
    from hwprof.collectors.base import PassContext

    from hwprof.core.markers import MarkerBus

    config = RunConfig()
    ctx = PassContext(config, tmp_path, "kernels", MarkerBus())
    ctx.out_dir.mkdir(parents=True)
    tool = ps.PerfRecordTool("/bin/false", 1, ctx, NO_PMU)
    result = tool.finish(3, timeout_s=5)
    assert result.status == "failed" and "never reached its measured iterations" in result.reason
    assert tool.process is None, "perf was never launched"
    assert not any(ctx.out_dir.glob("perf.*")), "the FIFOs are gone"


def test_perf_that_dies_at_once_fails_with_its_words(tmp_path: Path) -> None:
    from hwprof.collectors.base import PassContext

    from hwprof.core.markers import MarkerBus

    ctx = PassContext(RunConfig(), tmp_path, "kernels", MarkerBus())
    ctx.out_dir.mkdir(parents=True)
    fake = tmp_path / "perf"
    fake.write_text(
        "#!/bin/sh\necho 'Error: Access to performance monitoring and observability operations is limited.'\nexit 255\n"
    )
    fake.chmod(0o755)
    tool = ps.PerfRecordTool(str(fake), 1, ctx, NO_PMU)
    assert ctl.request_attach(ctx.out_dir, timeout_s=15) is False, "released at once, told perf is not there"
    result = tool.finish(0, timeout_s=5)
    assert result.status == "failed" and "Access to performance monitoring" in result.reason
    assert "perf_event_paranoid" in result.fix


def test_named_share_outside_openmp_is_a_share() -> None:
    """OpenMP's own named symbols count in neither part: the figure stays within 0-1 (it reached 1.0029)."""
    from types import SimpleNamespace

    from hwprof.collectors.perf_sampling.data_tables import named_outside_openmp

    from hwprof.core.kernels import Bucket

    bucket = Bucket()
    sample = SimpleNamespace(tid=1, t_ns=0, period=1, counts={})
    codes = [("GOMP_barrier", KIND_OPENMP)] * 5 + [("conv_kernel", KIND_JIT)] * 3 + [("[unknown]", KIND_JIT)]
    for name, kind in codes:
        bucket.add(SimpleNamespace(name=name, kind=kind, library="x"), sample)
    assert named_outside_openmp(bucket) == 3 / 4


@pytest.mark.skipif(PERF is None, reason="perf is not installed (Debian: apt-get install linux-perf)")
@pytest.mark.parametrize("measured", [True, False], ids=["enabled", "never-measured"])
def test_perf_joins_a_running_service_before_its_window(tmp_path: Path, measured: bool) -> None:
    """hwprof attach: a real `perf record -p` joins the service when the tool is made, its events disabled, so the
    window's first measured call (one of the service's requests) only waits for an enable (it waited ~150 ms for
    perf to start); a window that never measures stops that perf and fails as before."""
    from hwprof.collectors.base import PassContext

    from hwprof.core.markers import MarkerBus
    from hwprof.core.program_spec import ProgramSpec

    service = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        config = RunConfig(program=ProgramSpec(argv=["service.py"], cwd=str(tmp_path), attached=service.pid))
        ctx = PassContext(config, tmp_path, "kernels", MarkerBus())
        ctx.out_dir.mkdir(parents=True)
        tool = ps.PerfRecordTool(PERF, service.pid, ctx, NO_PMU)
        perf = tool.process
        assert perf is not None and perf.poll() is None, "perf started with the tool, before any request"
        if measured:
            assert ctl.request_attach(ctx.out_dir, timeout_s=30) is True
            assert tool.process is perf and tool.attach_ms is not None, "the same perf, enabled"
        result = tool.finish(0, timeout_s=0)
        assert perf.poll() is not None, "perf ended with the window"
        if not measured:
            assert result.status == "failed" and "never reached its measured iterations" in result.reason
        assert not any(ctx.out_dir.glob("perf.ctl")), "the FIFOs are gone"
    finally:
        service.kill()
        service.wait()
