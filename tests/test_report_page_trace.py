"""report.html says where the run's trace is: a collect writes the page before it builds trace.pftrace, so the
page is written again once the trace exists (it said "not built yet" of a trace built a moment later)."""

from __future__ import annotations

import shutil
from pathlib import Path

from rich.console import Console

from hwprof.api.collecting import _render_collected
from hwprof.rundir.names import REPORT_HTML, TRACE_NAME
from hwprof.rundir.reader import RunData
from hwprof.session.stopping import StopSignals

FIXTURE = Path(__file__).parent / "fixtures" / "rundir_small"
NOT_BUILT = "not built yet"


def _render(tmp_path: Path) -> tuple[Path, str]:
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE, run_dir, ignore=shutil.ignore_patterns("golden", "README.md", TRACE_NAME, REPORT_HTML))
    console = Console(record=True, width=100)
    code = _render_collected(run_dir, RunData.load(run_dir), None, False, console, StopSignals())
    assert code is None, console.export_text()
    return run_dir, console.export_text()


def test_the_page_of_a_collect_names_the_trace_it_built(tmp_path: Path) -> None:
    run_dir, printed = _render(tmp_path)
    assert (run_dir / TRACE_NAME).is_file(), printed
    page = (run_dir / REPORT_HTML).read_text()
    assert TRACE_NAME in page and NOT_BUILT not in page


def test_a_trace_that_could_not_be_built_leaves_the_page_saying_so(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE, run_dir, ignore=shutil.ignore_patterns("golden", "README.md", TRACE_NAME, REPORT_HTML))
    (run_dir / TRACE_NAME).mkdir()  # the trace cannot be written over a folder: its build fails
    console = Console(record=True, width=100)
    assert _render_collected(run_dir, RunData.load(run_dir), None, False, console, StopSignals()) is None
    assert "could not be built" in console.export_text()
    assert NOT_BUILT in (run_dir / REPORT_HTML).read_text()


def test_hwprof_trace_writes_the_page_again(tmp_path: Path) -> None:
    """A page that said "not built yet" names the trace once `hwprof trace RUN` built it."""
    import subprocess
    import sys

    run_dir, _ = _render(tmp_path)
    (run_dir / TRACE_NAME).unlink()
    page = run_dir / REPORT_HTML
    page.write_text(
        page.read_text().replace("</code> in the run directory", "</code> (not built yet) in the run directory", 1)
    )
    assert NOT_BUILT in page.read_text()
    done = subprocess.run([sys.executable, "-m", "hwprof", "trace", str(run_dir)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (run_dir / TRACE_NAME).is_file() and NOT_BUILT not in page.read_text()
