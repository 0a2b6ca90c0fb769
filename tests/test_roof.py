"""The compute roof is the machine's (issue 46): a run that exceeds the measured peak raises its roof to its own
best layer rate (no % peak above 100 anywhere), and the paper peak stands beside it, from /proc/cpuinfo.
The busy/quiet cache of the measured peak is tested in test_machine.py with an injected probe."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from fake_cpu import FakeCpu, cpuinfo
from test_analysis import PEAKS, make_run
from test_report import FIXTURE, render

from hwprof.analysis.roofline import Roof, RoofStatus, raise_to_best
from hwprof.analysis.run_analysis import analyse
from hwprof.hardware.paper_peak import paper_peak
from hwprof.rundir.reader import RunData

PAPER = {
    "gflops": 332.3,
    "cores": 2,
    "cores_source": "distinct (physical id, core id) pairs in /proc/cpuinfo",
    "ghz": 2.596,
    "ghz_source": "`cpu MHz` of /proc/cpuinfo",
    "flop_per_cycle": 64,
    "flop_source": "ISA from the flags: avx512f (512-bit), fma; assumed by CPU family",
    "host_cores": 2,
    "reason": "",
}


def test_raise_to_best_keeps_a_roof_nothing_exceeds() -> None:
    roof = RoofStatus(Roof(100.0, 10.0, 2))
    assert raise_to_best(roof, {"model.0 Conv": 90.0}) is roof  # under the roof: unchanged
    raised = raise_to_best(roof, {"model.0 Conv": 90.0, "model.5 RepConv": 150.0, "model.7 Conv": 120.0}).roof
    assert raised is not None and raised.raised
    assert (raised.peak_gflops, raised.measured_gflops, raised.probe_gflops) == (150.0, 100.0, 100.0)
    assert raised.raised_by == "model.5 RepConv" and raised.above_measured == 2
    assert raised.ridge == pytest.approx(15.0)  # the ridge moves with the roof
    assert "this run's own best rate (model.5 RepConv)" in raised.compute_text()
    assert raised.to_dict()["measured_gflops"] == 100.0 and raised.to_dict()["layers_above_measured"] == 2
    assert raised.best_unscaled is None
    rates = {"model.5 RepConv": 150.0}
    assert raise_to_best(roof, rates, {"model.5 RepConv": 140.0}).roof.best_unscaled is None  # type: ignore[union-attr]
    scaled = raise_to_best(roof, rates, {"model.5 RepConv": 60.0}).roof  # 2.5x its own measured rate
    assert scaled is not None and scaled.best_unscaled == 60.0 and scaled.peak_gflops == 150.0


def test_run_faster_than_its_peak_uses_its_best_layer_as_roof(tmp_path: Path) -> None:
    """model.0 runs at 100 GFLOP/s, model.1 at 67, against a measured peak of 50: the roof is 100."""
    busy = {**PEAKS, "gflops": 50.0, "interference": 0.56, "source": "busy", "gflops_spread": [40.0, 50.0]}
    a = analyse(RunData.load(make_run(tmp_path / "p", peaks=busy)))
    roof = a.layers.roof.roof
    assert roof is not None and roof.raised and roof.source == "busy" and roof.gflops_spread == (40.0, 50.0)
    assert roof.peak_gflops == pytest.approx(100.0) and roof.measured_gflops == 50.0
    assert roof.raised_by == "model.0 Conv" and roof.above_measured == 2
    assert roof.best_unscaled == pytest.approx(50.0)  # 80 ms in the layers pass, scaled x0.5 to the timing pass
    rates = [r.pct_peak for r in a.layers.layers if r.pct_peak is not None]
    assert max(rates) == pytest.approx(100.0) and all(p <= 100.0 + 1e-9 for p in rates)
    assert all(t.pct_peak is None or t.pct_peak <= 100.0 + 1e-9 for t in a.types)
    assert a.roofline is not None and a.roofline.pct_peak is not None and a.roofline.pct_peak <= 100.0
    titles = [f.title for f in a.findings]
    raised = next(t for t in titles if "ran faster than the measured peak" in t)
    assert raised.startswith("2 layers") and "this run's own best rate, 100.0 GFLOP/s (model.0 Conv)" in raised
    busy_line = next(t for t in titles if "busy host" in t)
    assert "not cached" in busy_line
    caveat = next(f for f in a.findings if f.title == raised)
    assert "by its own time in its pass model.0 Conv ran at 50.0 GFLOP/s" in caveat.evidence
    efficiency = next(f for f in a.findings if f.title.startswith("forward runs at"))
    assert "roof (the run's best layer rate)" in efficiency.title and "above a 2-thread" in efficiency.evidence


def _percents(text: str, header: str) -> list[float]:
    """The values of a table's `header` column in the text report."""
    lines = text.splitlines()
    out: list[float] = []
    for i, line in enumerate(lines):
        if "┃" not in line or header not in line:
            continue
        cells = [c.strip() for c in line.strip("┃ ").split("┃")]
        col = cells.index(header)
        for row in lines[i + 2 :]:
            if not row.startswith("│"):
                break
            value = [c.strip() for c in row.strip("│ ").split("│")][col]
            if re.fullmatch(r"[\d.]+", value):
                out.append(float(value))
    return out


def test_recorded_run_with_a_low_peak_prints_no_percent_above_100(tmp_path: Path) -> None:
    """The recorded yolov8n run (tests/fixtures/rundir_report), its peak lowered below its best layer (2.2
    GFLOP/s, model.3): the report names the roof as the run's own, with the probe's figure, and no % peak above 100."""
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE, run_dir, ignore=shutil.ignore_patterns("golden", "README.md"))
    doc = json.loads((run_dir / "run.json").read_text())
    doc["peaks"].update(gflops=1.0, gflops_samples=[0.8, 1.0], paper=PAPER)
    (run_dir / "run.json").write_text(json.dumps(doc))
    before = json.loads((FIXTURE / "run.json").read_text())["peaks"]["gflops"]
    text = render(run_dir, width=160, top=200)
    flat = " ".join(text.split())
    percents = _percents(text, "% peak")
    assert len(percents) > 20 and max(percents) == pytest.approx(100.0, abs=0.05), percents
    assert "compute roof │ 2.2 GFLOP/s (this run's best layer: model.3 Conv)" in flat
    assert "measured peak │ 1.0 GFLOP/s (measured: large matmul); 6 layers ran faster" in flat
    assert "probe │ samples 0.8..1.0 GFLOP/s; busy host (load 8.8): likely too low" in flat
    assert "6 layers ran faster than the measured peak (1.0 GFLOP/s): the roof is this run's own best rate" in flat
    assert "forward achieved │ 0.599 GFLOP/s = 27.2% of the roof" in flat
    assert "paper peak │ 332.3 GFLOP/s (paper figure, not measured: 2 cores x 2.60 GHz x 64 FLOP/cycle)" in flat
    assert "measured above the paper figure" not in flat
    assert before > 1.0


@pytest.mark.parametrize(
    ("cpu", "per_cycle", "ghz", "words"),
    [
        ("xeon-amx", 64, 2.0, ["avx512f (512-bit)", "2 FMA x 16 FP32 lanes", "assumed by CPU family: Intel"]),
        ("epyc-avx512", 32, 2.4, ["avx512f (512-bit)", "2 FMA x 8 FP32 lanes", "Zen 4 splits AVX-512"]),
        ("epyc-no-avx512", 32, 2.45, ["avx2 (256-bit)", "2 FMA x 8 FP32 lanes", "AMD family 0x19"]),
    ],
)
def test_paper_peak_from_cpuinfo(cpu: str, per_cycle: int, ghz: float, words: list[str]) -> None:
    """cores x clock x FLOP/cycle from a fake /proc/cpuinfo (tests/fake_cpu.py): each factor with its source."""
    paper = paper_peak(cpuinfo(cpu, cpus=4), threads=2)
    assert paper.flop_per_cycle == per_cycle and paper.ghz == pytest.approx(ghz)
    assert (paper.cores, paper.host_cores) == (2, 4) and "the run's 2 threads on 2 of 4 cores" in paper.cores_source
    assert paper.gflops == pytest.approx(2 * ghz * per_cycle) and paper.reason == ""
    assert "cpu MHz" in paper.ghz_source
    for w in words:
        assert w in paper.flop_source, paper.flop_source
    assert "paper figure (not measured)" in paper.text()


def test_paper_peak_variants() -> None:
    """Zen 5 EPYC (full 512-bit FMA), a rated clock in the model name, a 1-FMA Xeon, no FMA, nothing known."""
    zen5 = cpuinfo("epyc-avx512").replace("cpu family\t: 25", "cpu family\t: 26")
    assert paper_peak(zen5).flop_per_cycle == 64 and "Zen 5" in paper_peak(zen5).flop_source
    silver = cpuinfo("xeon-amx").replace("Platinum 8480+", "Silver 4114 CPU @ 2.20GHz")
    paper = paper_peak(silver)
    assert paper.flop_per_cycle == 32 and "1 FMA unit" in paper.flop_source
    assert paper.ghz == pytest.approx(2.2) and "rated clock in the model name" in paper.ghz_source
    no_fma = cpuinfo("epyc-no-avx512").replace(" avx2 fma", "")
    assert paper_peak(no_fma).flop_per_cycle == 16 and "without fma" in paper_peak(no_fma).flop_source
    bare = paper_peak("processor\t: 0\nmodel name\t: Mystery\n")
    assert bare.gflops is None and "no clock" in bare.reason and "no flags" in bare.reason
    assert paper_peak(cpuinfo("xeon-amx")).to_dict()["gflops"] == pytest.approx(256.0)


def test_run_json_records_the_paper_peak_beside_the_measured_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """run.json's peaks: the measured figures and `paper`; a failed measurement still records the paper peak."""
    from hwprof.core import host_facts
    from hwprof.hardware import machine
    from hwprof.session.run_doc import peaks_doc

    monkeypatch.setattr(host_facts, "_replayed", FakeCpu("xeon-amx"))  # host_facts.replaying, for the whole test
    quiet = machine.Peaks(
        gflops=200.0,
        gbps=20.0,
        threads=2,
        host_key="k",
        cpu_model="c",
        logical_cpus=2,
        torch_version="t",
        measured_at="now",
        load_avg_1m=0.1,
        gflops_method="m",
        gbps_method="m",
        gflops_samples=[150.0, 200.0],
        source=machine.MEASURED_QUIET,
    )
    monkeypatch.setattr(machine, "measure_peaks", lambda threads: quiet)
    doc = peaks_doc(2, "run.json")
    assert doc.gflops == 200.0 and doc.source == "measured" and doc.gflops_spread == [150.0, 200.0]
    assert doc.paper is not None and doc.paper.gflops == pytest.approx(256.0) and doc.paper.flop_per_cycle == 64

    def broken(threads: int) -> machine.Peaks:
        raise RuntimeError("no torch")

    monkeypatch.setattr(machine, "measure_peaks", broken)
    failed = peaks_doc(2, "run.json")
    assert failed.status == "unavailable" and "no torch" in str(failed.reason)
    assert failed.paper is not None and failed.paper.gflops == pytest.approx(256.0)


def test_rates_use_the_pass_own_clean_forward_where_the_processes_ran_at_different_speeds() -> None:
    """The layers pass's clean forward (its forward / its paired cost) 9x the timing pass's: the host's load changed
    between the processes, so rates are taken against the layers pass's own clean forward (in one process); within
    1.5x, against the forward the times are scaled to."""
    from types import SimpleNamespace

    from hwprof.analysis.layers.times import TimeScale

    paired = SimpleNamespace(ratio=1.2)
    ts = TimeScale("layers", SimpleNamespace(), 1126.0, timing_fwd=104.0, paired=paired)  # type: ignore[arg-type]
    ts.forward_ms = 104.0
    assert ts.process_ratio == pytest.approx(1126.0 / 1.2 / 104.0)
    assert ts.rate_forward_ms == pytest.approx(1126.0 / 1.2) and ts.rates_unscaled
    ts.source_fwd = 130.0  # clean 108 ms: the same speed, the difference is the hooks' cost
    assert ts.rate_forward_ms == 104.0 and not ts.rates_unscaled
    ts.paired = None  # no clean iterations: nothing to tell the processes apart by, the scaled forward stays
    assert ts.rate_forward_ms == 104.0
