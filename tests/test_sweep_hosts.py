"""Hosts as a sweep dimension (kinds of machine, software versions, grouping in the table and in compare),
`sweep --resume`, and the refusals of `sweep --ray` that need no cluster. The live cluster is test_sweep_ray.py."""

from __future__ import annotations

import copy
import io
import json
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_cpu import CPUS, FakeCpu
from rich.console import Console
from test_analysis import make_run

from hwprof.analysis.compare import compare_runs
from hwprof.analysis.sweep.rows import SweepPoint, SweepResult, row_from_run
from hwprof.cli.main import main
from hwprof.core.host import host_info
from hwprof.core.host_facts import replaying
from hwprof.core.host_kinds import differing_software, group_by_kind, host_kind, select_kinds, software
from hwprof.render.compare.views import comparison_markdown, sweep_markdown
from hwprof.sweep import points as sweep_mod
from hwprof.sweep.points import SweepPlan, plan_from_file, run_sweep

POINT = SweepPoint("toyolo", "torch", "fp32", 2, 1)


EPYC_HOST: dict[str, Any] = {
    "hostname": "epyc-1",
    "cpu_model": "AMD EPYC",
    "logical_cpus": 2,
    "physical_cores": 2,
    "smt": False,
    "affinity": [0, 1],
    "isa_flags": ["avx2", "avx512f", "avx512_bf16", "avx512_vnni", "fma"],
    "governor": "unreadable",
    "kernel": "6.1.0-test",
    "os": "Linux-6.1.0-test-x86_64",
    "perf_event_paranoid": "2",
    "python": "3.11.2",
    "torch": {"version": "2.13.0+cpu", "num_threads": 2, "cpu_capability": "AVX512"},
    "packages": {"torch": "2.13.0+cpu", "hwprof": "0.1.0"},
}
"""The first kind of machine: fixed data, never this host's (whose CPU may be either kind, or a third)."""


@pytest.fixture(scope="module")
def this_host() -> dict[str, Any]:
    return copy.deepcopy(EPYC_HOST)


def other_host(host: dict[str, Any], torch: str | None = None) -> dict[str, Any]:
    """The host record changed into another kind: a bigger Intel part with AMX."""
    other = copy.deepcopy(host)
    other.update(hostname="sapphire-1", cpu_model="Intel(R) Xeon(R) Platinum 8480+", logical_cpus=112)
    other["isa_flags"] = sorted({*host["isa_flags"], "amx_tile", "amx_bf16", "amx_int8"})
    if torch:
        other["torch"]["version"] = torch
    return other


@pytest.mark.parametrize("cpu", ["epyc-no-avx512", "xeon-amx"])
def test_host_record_and_kinds_on_other_cpus(cpu: str) -> None:
    """host_info on another CPU (its /proc/cpuinfo given): its model and the ISA flags recorded, and the kind."""
    from hwprof.core import host as host_mod

    model, flags = CPUS[cpu]
    with replaying(FakeCpu(cpu)):
        record = host_info().to_json()
    assert record["cpu_model"] == model
    assert record["isa_flags"] == [f for f in host_mod.ISA_RECORDED if f in flags.split()]
    widest = "amx_tile" if "amx" in cpu else "avx2"
    assert host_kind(record).label.endswith(widest)


def run_on(path: Path, host: dict[str, Any]) -> Path:
    make_run(path)
    doc = json.loads((path / "run.json").read_text())
    doc["host"] = host
    (path / "run.json").write_text(json.dumps(doc))
    return path


def test_kinds_of_machine(this_host: dict[str, Any]) -> None:
    mine, other = host_kind(this_host), host_kind(other_host(this_host))
    assert mine.cpu_model == this_host["cpu_model"] and mine.cores == this_host["logical_cpus"]
    assert host_kind(copy.deepcopy(this_host)) == mine and mine.slug == host_kind(this_host).slug
    assert mine != other and mine.slug != other.slug and "amx_tile" in other.label
    same_cpu_fewer_cores = {**this_host, "logical_cpus": this_host["logical_cpus"] * 2}
    assert host_kind(same_cpu_fewer_cores) != mine
    nodes = {"n1": this_host, "n2": other_host(this_host), "n3": copy.deepcopy(this_host)}
    assert group_by_kind(nodes) == {mine: ["n1", "n3"], other: ["n2"]}
    assert select_kinds([mine, other], ["xeon"]) == [other]
    assert select_kinds([mine, other], [mine.slug]) == [mine]
    assert select_kinds([mine, other], []) == [mine, other]
    with pytest.raises(ValueError, match="--hosts 'graviton': no node of the cluster is of that kind"):
        select_kinds([mine, other], ["xeon", "graviton"])


def test_software_versions(this_host: dict[str, Any]) -> None:
    mine = software(this_host)
    assert mine["torch"] == this_host["torch"]["version"] and mine["python"] == this_host["python"]
    ort = software(this_host, {"name": "onnxruntime", "version": "1.31.1"})
    assert ort["onnxruntime"] == "1.31.1"
    assert differing_software([mine, ort]) == []  # a runtime only one point uses is no difference
    assert differing_software([mine, software(other_host(this_host, torch="2.12.0+cpu"))]) == ["torch"]


def test_sweep_table_groups_by_host(tmp_path: Path, this_host: dict[str, Any]) -> None:
    """Rows of two kinds interleaved come out grouped, each saying its host, with the torch versions beside."""
    other = other_host(this_host, torch="2.12.0+cpu")
    hosts = [this_host, other, this_host, other]
    rows = [row_from_run(run_on(tmp_path / f"r{i}", h), POINT, "complete") for i, h in enumerate(hosts)]
    assert rows[0].host == this_host["hostname"] and rows[1].host == "sapphire-1"
    assert rows[1].cores == 112 and "amx_tile" in rows[1].isa and rows[1].versions["torch"] == "2.12.0+cpu"
    text = sweep_markdown(SweepResult(rows, tmp_path))
    lines = [line for line in text.splitlines() if line.startswith("| ") and "toyolo" in line]
    kinds = [host_kind(this_host).label, host_kind(other).label]
    assert [next(k for k in kinds if k in line) for line in lines] == [kinds[0], kinds[0], kinds[1], kinds[1]]
    assert all(f"torch {this_host['torch']['version']}" in line for line in lines[:2])
    assert all("torch 2.12.0+cpu" in line for line in lines[2:])
    assert "the points ran different software (torch)" in text
    one_kind = sweep_markdown(SweepResult(rows[::2], tmp_path))
    assert "| host |" not in one_kind and "| software |" not in one_kind
    assert f"software of every point: torch {this_host['torch']['version']}" in one_kind
    assert "sapphire-1" in (tmp_path / "r1" / "run.json").read_text()


def test_compare_groups_by_host(tmp_path: Path, this_host: dict[str, Any]) -> None:
    other = other_host(this_host, torch="2.12.0+cpu")
    runs = [run_on(tmp_path / "a", this_host), run_on(tmp_path / "b", other), run_on(tmp_path / "c", this_host)]
    c = compare_runs(runs)
    assert [h.run_id for h in c.runs] == ["a", "c", "b"]
    assert any("grouped by kind of machine" in n for n in c.notes)
    text = comparison_markdown(c)
    assert f"| host | {host_kind(this_host).label} | {host_kind(this_host).label} | {host_kind(other).label} |" in text
    assert "| software | torch " in text and "torch 2.12.0+cpu |" in text


def test_resume_runs_only_missing_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A local sweep stopped after its first point: --resume DIR collects the rest with the recorded options,
    and an interrupted point's partial run is kept aside, not deleted."""
    template = make_run(tmp_path / "template")
    calls: list[str] = []

    def command(point: SweepPoint, out: Path, *_args: object) -> list[str]:
        calls.append(point.name)
        if point.threads == 2 and not (tmp_path / "second-time").exists():
            return [sys.executable, "-c", f"import os; os.makedirs({str(out)!r}); raise KeyboardInterrupt"]
        code = "import shutil, sys; shutil.copytree(sys.argv[1], sys.argv[2])"
        return [sys.executable, "-c", code, str(template), str(out)]

    monkeypatch.setattr(sweep_mod, "collect_command", command)
    out = tmp_path / "sweep"
    first = run_sweep(SweepPlan(["yolov8n"], [1, 2, 3], [1], out, iters=7, extra_args=["--only", "timing"]))
    assert [r.status for r in first.rows] == ["complete", "failed", "complete"]
    (out / "yolov8n-t2-b1" / "partial").write_text("")  # a point stopped half-way
    (out / "yolov8n-t3-b1").rename(out / "gone")  # and one never reached
    (tmp_path / "second-time").touch()
    calls.clear()
    plan, ray = plan_from_file(out)
    assert ray is None and plan.iters == 7 and list(plan.extra_args) == ["--only", "timing"]
    assert main(["sweep", "--resume", str(out)]) == 0
    assert calls == ["yolov8n-t2-b1", "yolov8n-t3-b1"]
    assert (out / "yolov8n-t2-b1.incomplete-1" / "partial").exists()
    statuses = [r["status"] for r in json.loads((out / "sweep.json").read_text())["rows"]]
    assert statuses == ["reused", "complete", "complete"]


def test_resume_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "no sweep_plan.json there" in _one_line_error(capsys, ["sweep", "--resume", str(tmp_path)])
    assert "give no --models" in _one_line_error(capsys, ["sweep", "--resume", str(tmp_path), "--models", "yolov8n"])
    assert "sweep needs --models (or --resume DIR)" in _one_line_error(capsys, ["sweep"])


def _one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    out = " ".join(capsys.readouterr().err.split())
    assert out.startswith("hwprof: error:")
    return out


def test_ray_refusals_without_a_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = ["sweep", "--models", "yolov8n", "--imgsz", "64", "--out", str(tmp_path / "s")]
    out = _one_line_error(capsys, [*base, "--per-host"])
    assert "--per-host and --hosts choose nodes of a Ray cluster: give --ray ADDRESS too" in out
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    out = _one_line_error(capsys, [*base, "--ray", "auto"])
    from hwprof.sweep.ray_connect import INSTALL_FIX

    assert f"--ray needs Ray, which is not installed: {INSTALL_FIX}" in out and "constraints.txt" in INSTALL_FIX
    assert not (tmp_path / "s").exists()


def test_ray_refusal_of_an_address_with_no_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Needs the [ray] extra: without it the same command says Ray is not installed (the test above)."""
    pytest.importorskip("ray", reason="the [ray] extra is not installed: pip install -c constraints.txt '.[ray]'")
    base = ["sweep", "--models", "yolov8n", "--imgsz", "64", "--out", str(tmp_path / "s")]
    with socket.socket() as s:  # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = _one_line_error(capsys, [*base, "--ray", f"127.0.0.1:{port}"])
    assert f"no Ray cluster at 127.0.0.1:{port}" in out and "ray start --head" in out
    assert not (tmp_path / "s").exists()


def test_ray_sweep_render_width(tmp_path: Path, this_host: dict[str, Any]) -> None:
    """The host and software columns fit an 80-column terminal."""
    from rich.cells import cell_len

    from hwprof.render.compare.views import render_sweep

    hosts = [this_host, other_host(this_host, torch="2.12.0+cpu")]
    rows = [row_from_run(run_on(tmp_path / f"r{i}", h), POINT, "complete") for i, h in enumerate(hosts)]
    buf = io.StringIO()
    render_sweep(SweepResult(rows, tmp_path), Console(file=buf, width=80, color_system=None))
    assert all(cell_len(line.rstrip()) <= 80 for line in buf.getvalue().splitlines())
    assert "host" in buf.getvalue()


def test_sweep_plot_groups_by_host(tmp_path: Path, this_host: dict[str, Any]) -> None:
    from hwprof.render.compare.views import by_host
    from hwprof.render.sweep.plot import plot_sweep, sweep_figure

    other = other_host(this_host)
    points = [SweepPoint("toyolo", "torch", "fp32", t, 1) for t in (1, 2)]
    hosts = [this_host, other, this_host, other]
    rows = [row_from_run(run_on(tmp_path / f"r{i}", h), points[i // 2], "complete") for i, h in enumerate(hosts)]
    fig = sweep_figure(by_host(rows))
    assert fig is not None
    ax = fig.axes[0]
    legend = ax.get_legend()
    assert legend is not None
    assert [t.get_text() for t in legend.get_texts()] == [host_kind(this_host).label, host_kind(other).label]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["toyolo t1 b1", "toyolo t2 b1"] * 2
    colours = [tuple(p.get_facecolor()) for p in ax.patches]
    assert colours[0] == colours[1] != colours[2] == colours[3]
    png = plot_sweep(rows)
    assert png is not None and png[:4] == b"\x89PNG"
    for r in rows:
        r.latency_ms = None
    assert plot_sweep(rows) is None
