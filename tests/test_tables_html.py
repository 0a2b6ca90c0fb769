"""`hwprof compare --format html` (with and without the gate) and a sweep's sweep.html: the terminal's tables as one
self-contained page, every run value escaped, opened in headless Chromium (Debian's `chromium`, which .ci/run
installs) with every host name mapped to nothing."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
from headless_page import NEEDS_CHROMIUM, open_page, page_url
from test_report_html import HOSTILE_MODEL, _copy, _make_hostile

from hwprof.analysis.compare import compare_runs
from hwprof.render.compare.views import specs


def _compare(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "hwprof", "compare", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The report fixture run, and a copy of it whose model name holds a script and quotes."""
    root = tmp_path_factory.mktemp("tables")
    base, hostile = _copy(root / "base"), _copy(root / "hostile")
    _make_hostile(hostile)
    return base, hostile


def test_compare_page_has_the_terminals_tables_with_run_values_escaped(runs: tuple[Path, Path]) -> None:
    base, hostile = runs
    done = _compare(str(base), str(hostile), "--format", "html")
    assert done.returncode == 0, done.stderr
    page = done.stdout
    tables = specs(compare_runs([base, hostile]))
    assert page.startswith("<!DOCTYPE html>") and page.count("<table") == len([t for t in tables if t.cols])
    assert all(f"<h2>{t.title}</h2>" in page for t in tables if "<" not in t.title)
    assert "<script>document" not in page and "yolo&lt;script&gt;document.title=" in page
    assert page.count("<script>") == 1  # the page's own sorting script


def test_gate_page_leads_with_its_verdict() -> None:
    """A slower layer: the page's first table is the verdict, FAIL in its title, the layer's row first."""
    from rich.console import Console
    from test_gate import OPTS, _run

    from hwprof.analysis.gate.judge import judge
    from hwprof.render.gate import GateOutputs, show_verdict

    v = judge(_run("A", 1), _run("B", 1, layer_scale={"model.0": 1.5}), OPTS)
    out = io.StringIO()
    show_verdict(v, OPTS, GateOutputs(), Console(file=out), "html")
    page = out.getvalue()
    first = re.search(r"<h2>([^<]*)</h2>", page)
    assert first is not None and first.group(1).startswith("gate: FAIL"), page[:2000]
    assert re.search(r"<tbody>\s*<tr><td>model\.0 Conv</td><td>fail</td>", page), page[:3000]
    assert "method: " in page and "bootstrap" in page


@pytest.mark.slow
@NEEDS_CHROMIUM
def test_chromium_opens_the_compare_page_with_no_error_and_no_request(runs: tuple[Path, Path], tmp_path: Path) -> None:
    base, hostile = runs
    page = tmp_path / "compare.html"
    page.write_text(_compare(str(base), str(hostile), "--format", "html").stdout)
    visit = open_page(page_url(page))  # the page's own requests only (headless_page.py)
    assert visit.requests[0] == visit.url and not visit.foreign_requests(), visit.foreign_requests()
    assert not visit.console, visit.console
    assert "<title>hwprof compare: 2 runs</title>" in visit.dom  # no script of the run's changed it
    assert HOSTILE_MODEL.split("<")[0] + "&lt;script&gt;" in visit.dom


def test_compare_of_runs_on_other_hosts_reads_whole_at_80_columns(runs: tuple[Path, Path], tmp_path: Path) -> None:
    """A host row whose cells are long (another kind of machine) is cut to fit, every table closed at 80 columns,
    the whole host in the notes (before: the runs table ran past the terminal's right edge)."""
    import json
    import shutil

    from rich.cells import cell_len
    from rich.console import Console

    from hwprof.render.compare.views import render_comparison

    other = tmp_path / "other"
    shutil.copytree(runs[0], other)
    doc = json.loads((other / "run.json").read_text())
    doc["host"].update(cpu_model="Intel(R) Xeon(R) Platinum 8480+ (Sapphire Rapids)", logical_cpus=16)
    doc["host"]["isa_flags"] = ["avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_int8"]
    (other / "run.json").write_text(json.dumps(doc))
    out = io.StringIO()
    render_comparison(compare_runs([runs[0], other]), Console(file=out, width=80, color_system=None))
    lines = out.getvalue().splitlines()
    assert all(cell_len(line.rstrip()) <= 80 for line in lines), "\n".join(lines[:30])
    host = next(line for line in lines if line.startswith("│ host"))
    assert host.rstrip().endswith("│") and "Xeon" in host
    assert "Sapphire Rapids" in " ".join(" ".join(lines).split())  # whole in the notes
