"""Every counter track of a real trace reads back, in Perfetto's own trace processor, what the records hold:
each sample's timestamp and value (render/trace_counters.py, also scripts/trace_counter_check.py).

Perfetto's trace processor keeps a counter event's extra values only up to the first 0.0 and reads the
later ones as 0, so packing the samples of one instant into one event in record order drew zeros that
nothing measured (issue 25: sysstat tracks of a CPU run, NVML clocks and temperature of a GPU run). And
it reads every perf sample's unset timebase count as a 0 on a "cpu-clock" track.

- a CPU run: rundir_small (a real yolov8n run: sysstat and perf_events counters, zeros among them);
- the same with counter records of every zero pattern at an instant, more tracks than one event holds;
- the GPU run tests/gpu_rundir.py builds (the recorded NVML samples of an H100);
- perf samples of a real kernels pass, with their periods and (older records) without;
- slow: a real collect with sysstat, perf_events and perf sampling.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from gpu_rundir import NVML_SAMPLES, gpu_run
from run_store import option, stored_run
from test_trace_samples import make_run

from hwprof.trace.counters import CounterCheck, check_counters
from hwprof.trace.perfetto import build_trace
from hwprof.trace.processor import TraceSession, availability
from hwprof.trace.samples import COUNT_NAME

RUNDIR = Path(__file__).parent / "fixtures" / "rundir_small"
NVML_TRACKS = 7


def _check(run_dir: Path) -> CounterCheck:
    state = availability()
    if not state.available:
        pytest.skip(f"Perfetto's trace processor cannot run here: {state.reason}")
    stats = build_trace(run_dir, run_dir / "check.pftrace")
    with TraceSession(stats.path) as tp:
        result = check_counters(tp, run_dir)
    print("\n".join(result.lines()))
    return result


def _recorded(result: CounterCheck, pass_name: str) -> dict[str, Any]:
    return {t.name: t for t in result.tracks if t.pass_name == pass_name}


def test_cpu_run_counters_read_back_as_recorded(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(RUNDIR, run_dir)
    result = _check(run_dir)
    layers = _recorded(result, "layers")
    assert len(layers) == 12 and all(t.records > 0 for t in layers.values())  # 8 sysstat + 4 perf_events tracks
    assert result.ok, "\n".join(result.lines())
    assert layers["CPU python3 32557 (%)"].trace_zeros == 0  # read back as 0 at its second sample before
    assert result.unrecorded == []


def _zero_patterns(tracks: int, instants: int, t0: int) -> list[dict[str, Any]]:
    """At instant i, every track j whose bit j of i is set reads 0, else a distinct value (negative
    for odd tracks, -0.0 on the last instant of track 0): zeros first, last, alone and everywhere."""
    rows = []
    for i in range(instants):
        for j in range(tracks):
            value = 0.0 if (i >> (j % 6)) & 1 else (-1) ** j * (1000.5 * i + j + 1)
            if i == instants - 1 and j == 0:
                value = -0.0
            rows.append({"track": f"synthetic {j:02d}", "ts_ns": t0 + i * 1_000_000, "value": value, "kind": "counter"})
    return rows


def test_zeros_anywhere_among_the_samples_of_an_instant(tmp_path: Path) -> None:
    """11 tracks sampled together (more than one counter event carries: a value and 8 extras) at 64 instants."""
    run_dir = tmp_path / "run"
    shutil.copytree(RUNDIR, run_dir)
    layers = run_dir / "passes" / "layers"
    t0 = min(json.loads(line)["ts_ns"] for line in (layers / "sysstat.records.jsonl").open() if '"counter"' in line)
    rows = _zero_patterns(11, 64, t0)
    (layers / "synthetic.records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = _check(run_dir)
    synthetic = {n: t for n, t in _recorded(result, "layers").items() if n.startswith("synthetic")}
    assert len(synthetic) == 11 and all(t.records == 64 for t in synthetic.values())
    assert sum(t.records_zeros for t in synthetic.values()) > 300
    assert result.ok, "\n".join(result.lines())


def test_gpu_run_nvml_tracks_read_back_as_recorded(tmp_path: Path) -> None:
    run_dir, _ = gpu_run(tmp_path)
    result = _check(run_dir)
    gpu = _recorded(result, "gpu")
    assert len(gpu) == NVML_TRACKS and all(t.records == NVML_SAMPLES for t in gpu.values())
    assert result.ok, "\n".join(result.lines())
    for name in ("GPU SM clock (MHz)", "GPU memory clock (MHz)", "GPU memory used (bytes)", "GPU temperature (C)"):
        assert gpu[name].trace_zeros == gpu[name].records_zeros == 0, name  # 39 of 50 read 0 before


def test_perf_samples_counter_holds_their_periods(tmp_path: Path) -> None:
    """Per CPU, the running sum of the recorded periods (perf's cpu-clock at 2 kHz: 500,000 ns each)."""
    run_dir = make_run(tmp_path)
    result = _check(run_dir)
    kernels = _recorded(result, "kernels")
    assert len(kernels) == 1, kernels
    (name, track), *_ = kernels.items()
    assert name.endswith(": sum of sample periods") and track.records > 1000 and track.trace_zeros == 0
    assert result.ok, "\n".join(result.lines())


def test_perf_samples_without_periods_carry_their_count(tmp_path: Path) -> None:
    """Records written before periods were kept: the counter counts the samples, and says so."""
    run_dir = make_run(tmp_path)
    path = run_dir / "passes" / "kernels" / "perf_sampling.records.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert any("period" in r for r in rows)
    path.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "period"}) + "\n" for r in rows))
    result = _check(run_dir)
    track = _recorded(result, "kernels")[COUNT_NAME]
    assert track.trace == track.records > 1000 and track.trace_zeros == 0
    assert result.ok, "\n".join(result.lines())


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("perf") is None, reason="perf is not installed (Debian: apt-get install linux-perf)")
def test_real_collect_counters_read_back_as_recorded(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A real small collect (the suite's stored layers run): sysstat and perf_events counters sampled together, perf
    samples with periods, and torch's allocator's live bytes (torch_memory, in the layers pass beside sysstat's
    RSS, issue 59): memory.png draws both."""
    done = stored_run(tmp_path_factory, "layers", tmp_path / "run")
    out = done.path
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(option("layers", "--iters")) >= 10  # the allocator's events of 10 forwards and more
    result = _check(out)
    assert len(_recorded(result, "layers")) >= 8 and len(_recorded(result, "kernels")) == 1
    allocated = _recorded(result, "layers")["torch CPU allocated (bytes)"]
    assert allocated.trace == allocated.records > 100  # the allocator's events of 10 forwards and more
    assert result.ok, "\n".join(result.lines())
    import hwprof

    run = hwprof.load(out)
    memory = run.memory
    assert memory.height > 0 and memory["alloc_bytes"].max() > 64 * 64 * 4  # layer 0's output at least
    assert (out / "memory.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    timeline = run._analysis.memory.timeline
    assert timeline.rss is not None and timeline.live is not None and timeline.live.bands
