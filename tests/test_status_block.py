"""Reasons and fixes in `hwprof doctor` and the report's header stay readable at 80 columns (issue 17:
a five-column table cut each reason into a few characters a line)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from hwprof.analysis.run_analysis import analyse
from hwprof.render.report import _header_renderable, detail_lines
from hwprof.render.status_block import WIDE_FROM, StatusRow, status_renderable
from hwprof.rundir.reader import RunData

FIXTURE = Path(__file__).parent / "fixtures" / "rundir_report"

PAPI = StatusRow(
    "papi",
    "layers",
    "[yellow]unavailable[/]",
    "add_event(PAPI_TOT_CYC, PAPI_TOT_INS, PAPI_L1_DCM): PapiMiscellaneousError: Unknown error code. "
    "(PAPI_EMISC); start: PapiNoComponentError: Component Index isn't set. (PAPI_ENOCMP)",
    "the host exposes no usable PMU: run on bare metal or enable the VM's virtual PMU (KVM/QEMU: "
    "`-cpu host,pmu=on`); or use --counters perf (perf_event_open, which falls back to software events)",
)
EVENTS = StatusRow(
    "",
    "",
    "[yellow]3 unavailable[/]",
    "stalled-cycles-frontend, L1-dcache-load-misses, dTLB-load-misses: the kernel exposes no PMU for this event",
    "run on bare metal",
)


def _text(renderable: object, width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def _words_intact(text: str, *sources: str) -> None:
    """Every word of the sources appears whole in the text: none was cut across lines."""
    words = set(text.split())
    for source in sources:
        cut = [w for w in source.split() if w not in words]
        assert not cut, f"cut across lines: {cut}"


def test_status_at_80_columns_is_one_fact_per_line() -> None:
    text = _text(status_renderable("what this host can measure", [PAPI, EVENTS], 80), 80)
    _words_intact(text, PAPI.reason, PAPI.fix, EVENTS.reason, EVENTS.fix)
    lines = text.splitlines()
    assert lines[1].split() == ["papi", "pass", "layers:", "unavailable"]
    assert lines[2].startswith("  reason ") and "add_event(PAPI_TOT_CYC," in lines[2]
    assert sum(line.startswith("  fix ") for line in lines) == 2
    assert "│" not in text
    # each sentence takes a few lines, not one per few characters
    assert len(lines) <= 12, text


def test_wide_terminals_keep_the_table() -> None:
    text = _text(status_renderable("what this host can measure", [PAPI, EVENTS], WIDE_FROM), WIDE_FROM)
    header = next(line for line in text.splitlines() if "collector" in line)
    assert [c.strip() for c in header.strip("┃ ").split("┃")] == ["collector", "pass", "status", "reason", "fix"]
    _words_intact(text, "PapiMiscellaneousError:", "dTLB-load-misses:")


def test_doctor_at_80_columns_prints_no_table_of_collectors(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "hwprof", "doctor"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert proc.returncode == 0, proc.stderr
    collectors, runtimes = proc.stdout.split("runtimes on cpu (collect")
    # torch's fp16 is refused on the CPU: doctor no longer offers it there
    assert "fp32, bf16," in runtimes and "bf16-weights (fp16:" in runtimes and "bf16-weights, fp16" not in runtimes
    assert "┃" not in collectors and "│" not in collectors
    assert all(len(line) <= 80 for line in collectors.splitlines())
    assert any(line.startswith("timing ") and "pass timing: available" in line for line in collectors.splitlines())


def test_report_header_keeps_lists_of_names_out_of_the_key_column(tmp_path: Path) -> None:
    """A long list of skipped collectors in the no-wrap key column left the values a few characters."""
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE, run_dir, ignore=shutil.ignore_patterns("golden", "README.md"))
    a = analyse(RunData.load(run_dir))
    names = ["callgrind", "papi", "perf_sampling", "pyspy", "scalene", "torch_profiler", "rapl"]
    for name in names:
        a.unavailable[name] = {"status": "skipped", "reason": "not requested for this run", "fix": ""}
    text = _text(_header_renderable(a), 80)
    _words_intact(text, *(value for _, value in detail_lines(a)))
    assert "skipped" in text and all(f"{n}," in text or f"{n}:" in text for n in names)
