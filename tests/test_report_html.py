"""report.html: one self-contained page, rendered from the report's TableSpecs, escaped, opened in a real browser.

The unit tests read the page's text; the slow ones open it in headless Chromium (Debian's `chromium`,
installed by .ci/run; started by headless_page.py with every host name mapped to nothing), read its DOM and
every request the page itself made, and take a screenshot.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from headless_page import NEEDS_CHROMIUM, chromium, open_page, page_url
from PIL import Image

FIXTURE = Path(__file__).parent / "fixtures" / "rundir_report"
HOSTILE_MODEL = "yolo<script>document.title='pwned'</script>\"'"
HOSTILE_WEIGHTS = "/tmp/a \"quoted\" 'path'/<img src=x onerror=alert(1)>.pt"


def _copy(dest: Path) -> Path:
    shutil.copytree(FIXTURE, dest, ignore=shutil.ignore_patterns("golden", "README.md"))
    return dest


def _hwprof_report_html(run_dir: Path) -> str:
    """`hwprof report RUN --format html` as a child process; its stdout (the page)."""
    cmd = [sys.executable, "-m", "hwprof", "report", str(run_dir), "--format", "html"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _make_hostile(run_dir: Path) -> None:
    """A model name with a script and quotes, weights at a path with quotes and an <img> tag."""
    path = run_dir / "run.json"
    doc = json.loads(path.read_text())
    doc["model"].update(name=HOSTILE_MODEL, weights=HOSTILE_WEIGHTS, random_init=False)
    path.write_text(json.dumps(doc))


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The fixture run's report.html, written by the command; (run directory, what the command printed)."""
    run_dir = _copy(tmp_path_factory.mktemp("html") / "run")
    return run_dir, _hwprof_report_html(run_dir)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = _copy(tmp_path_factory.mktemp("hostile") / "run")
    _make_hostile(run_dir)
    _hwprof_report_html(run_dir)
    return run_dir


def _layer_rows(run_dir: Path) -> int:
    with open(run_dir / "layers.csv", newline="") as f:
        return sum(1 for _ in csv.DictReader(f))


def _urls(html: str) -> list[str]:
    """Every src/href/url() in the page that names a network address."""
    return re.findall(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//[^"'\s>]*|url\(\s*["']?(?:https?:)?//""", html)


@pytest.mark.slow
def test_command_prints_the_page_and_writes_it(page: tuple[Path, str]) -> None:
    """Issue 68: `report --format html > r.html` wrote the page's path (16 bytes); the help says HTML on stdout."""
    run_dir, out = page
    assert out.startswith("<!DOCTYPE html>") and out == (run_dir / "report.html").read_text()
    html = out
    assert "<strong>next</strong>" in html and f"<code>hwprof advise {run_dir}</code>" in html  # the first screen's
    assert html.count('<tr id="layer-') == _layer_rows(run_dir) == 23  # the whole layer table, not the top 15
    assert 'class="sortable"' in html
    assert html.count('src="data:image/png;base64,') == 4  # the plots, embedded
    assert _urls(html) == ['href="https://ui.perfetto.dev']  # the one link: how to open the trace
    assert "trace.pftrace" in html
    for title in ("pipeline stages (timing pass)", "collector overheads", "findings", "not measured"):
        assert title in html


@pytest.mark.slow
def test_findings_link_to_layer_rows(page: tuple[Path, str]) -> None:
    html = (page[0] / "report.html").read_text()
    links = set(re.findall(r'href="#(layer-\d+)"', html))
    rows = set(re.findall(r'<tr id="(layer-\d+)"', html))
    assert links and links <= rows


def test_run_values_are_escaped(tmp_path: Path) -> None:
    from hwprof.analysis.run_analysis import analyse
    from hwprof.render.html import render_html
    from hwprof.rundir.reader import RunData

    run_dir = _copy(tmp_path / "run")
    _make_hostile(run_dir)
    html = render_html(analyse(RunData.load(run_dir)), {}, run_dir)
    assert "<script>document" not in html and "<img src=x" not in html
    assert "yolo&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;&#34;&#39;" in html
    assert html.count("<script>") == 1  # the page's own sorting script


@pytest.mark.slow
@NEEDS_CHROMIUM
def test_chromium_shows_every_layer_with_no_console_error_and_no_request(page: tuple[Path, str]) -> None:
    """The page's DOM after load, and every request its own targets made: only its document (the browser's own
    calls, to Google or an updater, belong to no page and are not seen; headless_page.py)."""
    run_dir = page[0]
    visit = open_page(page_url(run_dir / "report.html"))
    assert visit.dom.count('<tr id="layer-') == _layer_rows(run_dir)
    assert visit.requests[0] == visit.url and not visit.foreign_requests(), visit.foreign_requests()
    assert not visit.console, visit.console


@pytest.mark.slow
@NEEDS_CHROMIUM
def test_chromium_screenshot_is_not_blank(page: tuple[Path, str], tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    done = chromium("--window-size=1280,900", f"--screenshot={shot}", (page[0] / "report.html").as_uri())
    assert shot.exists(), done.stderr[-2000:]
    image = Image.open(io.BytesIO(shot.read_bytes())).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 20)
    assert image.size == (1280, 900)
    assert colours is not None and len(colours) > 16, "a blank or single-colour page"


@pytest.mark.slow
@NEEDS_CHROMIUM
def test_chromium_shows_hostile_names_as_text(hostile: Path) -> None:
    done = chromium("--dump-dom", (hostile / "report.html").as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    assert "<title>hwprof report: yolo&lt;script&gt;" in dom  # the script ran not: the title is the text
    assert dom.count("<script") == 1 and dom.count("<img ") == 4  # the page's script and plots: nothing injected
    assert "yolo&lt;script&gt;document.title='pwned'&lt;/script&gt;\"'" in dom
    assert "&lt;img src=x onerror=alert(1)&gt;" in dom
