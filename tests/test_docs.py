"""The documentation: the MkDocs site builds with warnings as errors (broken links, missing pages and references
fail it), its generated reference pages hold what the code says, every `hwprof` command line shown in the docs
and the README parses with the real parser, and the short ones run for real on a recorded run and a tiny one.

Tests run from tests/ against the installed wheel; the docs are the checkout's (ROOT)."""

from __future__ import annotations

import argparse
import html as htmllib
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from run_store import stored_run

from hwprof.cli.args import build_parser
from hwprof.cli.exit_codes import EXIT_CODES
from hwprof.cli.main import parse_command

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FIXTURE = Path(__file__).parent / "fixtures" / "rundir_report"
FENCE = re.compile(r"^\s*(```|~~~)")
RUNNABLE = {"models", "doctor", "report", "trace"}
"""Commands short enough to run for every line that shows them (doctor without --peaks: no measuring)."""


NOT_COMMANDS = {"docs/architecture.md": "the code map's flow diagrams start with a command (hwprof report RUN ──► ...)"}
"""Pages whose fenced blocks hold no command lines, and why."""


def pages() -> list[Path]:
    """README.md and every Markdown page of the site (the hooks' generated pages are checked in the build)."""
    found = [ROOT / "README.md", *sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.parts)]
    return [p for p in found if str(p.relative_to(ROOT)) not in NOT_COMMANDS]


@dataclass(frozen=True)
class Shown:
    """A command line shown in a fenced code block."""

    page: str
    line: int
    words: list[str]
    """The words after `hwprof`, as a shell splits them (a trailing comment dropped)."""

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: hwprof {shlex.join(self.words)}"


def shown_commands(path: Path) -> Iterator[Shown]:
    """Each line in a fenced block that starts with `hwprof ` or `$ hwprof ` (`\\` continuations joined)."""
    lines = path.read_text().splitlines()
    inside = False
    i = 0
    while i < len(lines):
        line = lines[i]
        start = i + 1
        if FENCE.match(line):
            inside = not inside
        elif inside:
            text = line.strip().removeprefix("$ ")
            while text.endswith("\\") and i + 1 < len(lines):
                i += 1
                text = text[:-1] + " " + lines[i].strip()
            if text.startswith("hwprof "):
                words = shlex.split(text, comments=True)
                for shell in ("||", ">"):  # a shell's `cmd || true`, `cmd > file`
                    if shell in words:
                        words = words[: words.index(shell)]
                yield Shown(str(path.relative_to(ROOT)), start, words[1:])
        i += 1


ALL_SHOWN = [shown for page in pages() for shown in shown_commands(page)]


class RaisingParser(argparse.ArgumentParser):
    """The real parser's grammar, raising where the command line prints its error and exits 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ValueError(message)

    def exit(self, status: int = 0, message: str | None = None) -> None:  # type: ignore[override]
        raise ValueError(f"exit {status}: {message}")


def test_the_docs_show_commands_of_every_kind() -> None:
    """The extraction finds the commands (a test over no lines could not fail)."""
    commands = {shown.words[0] for shown in ALL_SHOWN}
    assert {"collect", "report", "trace", "compare", "advise", "sweep", "doctor", "models"} <= commands
    readme = [shown for shown in ALL_SHOWN if shown.page == "README.md"]
    assert len(readme) >= 5


@pytest.mark.parametrize("shown", ALL_SHOWN, ids=str)
def test_each_command_line_shown_parses(shown: Shown, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the docs' commands run from the repository root (a --config file is read)
    parser = build_parser(parser_class=RaisingParser)
    try:
        args = parse_command(list(shown.words), parser)
    except ValueError as exc:
        pytest.fail(f"{shown}: {exc}")
    assert args.command == shown.words[0]


def test_a_bad_command_line_is_caught() -> None:
    """The parse check fails on a line the parser refuses (an option that does not exist)."""
    with pytest.raises(ValueError, match="--no-such-option"):
        parse_command(["collect", "--no-such-option"], build_parser(parser_class=RaisingParser))


# --- the site -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`mkdocs build --strict` of the checkout into a temporary folder (a warning fails the build)."""
    if shutil.which("mkdocs") is None and subprocess.run([sys.executable, "-m", "mkdocs", "--version"]).returncode:
        pytest.fail("mkdocs is not installed: pip install -c constraints.txt '.[docs]' (tox's test env has it)")
    out = tmp_path_factory.mktemp("site")
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(out)]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's notice about its successor, not a warning
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_the_site_builds_with_every_page(site: Path) -> None:
    for page in ("index", "getting-started/index", "report/index", "trace/index", "python-api/index"):
        assert (site / f"{page}.html").exists(), page
    assert (site / "reference" / "cli" / "index.html").exists()
    assert (site / "reference" / "run-directory" / "index.html").exists()


def test_the_command_line_reference_is_the_parser(site: Path) -> None:
    """Every subcommand and every option of the real parser, and every exit status, are on the generated page."""
    html = (site / "reference" / "cli" / "index.html").read_text()
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))

    def words(text: str) -> str:  # a text's words, markup dropped, no space before punctuation
        return re.sub(r" ([:;,.)])", r"\1", " ".join(re.sub(r"<[^>]+>", " ", text).split()))

    text = words(html)
    for name, command in sub.choices.items():
        assert f"hwprof {name}" in html, name
        described = words(htmllib.escape((command.description or "").replace("`", ""), quote=False))
        assert described in text, (name, described)  # as the user reads it: `<model>` kept
        for action in command._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert option in html, (name, option)
    for exit_code in EXIT_CODES:
        assert exit_code.meaning.split(":")[0] in html, exit_code


def test_the_run_directory_reference_is_the_schema(site: Path) -> None:
    """Each field of run.json's records, with its docstring, is on the generated page."""
    import dataclasses

    from hwprof.schema.run import RunConfigDoc, RunDoc
    from hwprof.schema.run_passes import PassDoc

    html = (site / "reference" / "run-directory" / "index.html").read_text()
    for record in (RunDoc, PassDoc, RunConfigDoc):
        assert f'id="{record.__name__.lower()}"' in html, record
        for f in dataclasses.fields(record):
            if f.name not in ("json_extra", "json_order"):
                assert f"<code>{f.metadata.get('key', f.name)}</code>" in html, (record, f.name)
    assert "The user&rsquo;s own program" in html or "The user's own program" in html  # RunConfigDoc.program's


def test_the_python_api_page_documents_the_public_names(site: Path) -> None:
    """mkdocstrings rendered each public name's docstring from the code."""
    import hwprof

    html = (site / "python-api" / "index.html").read_text()
    for name in set(hwprof.__all__) - {"__version__"}:
        found = getattr(hwprof, name)
        assert f'id="{found.__module__}.{found.__qualname__}"' in html, name


# --- the fixes troubleshooting quotes are the ones the code prints --------------------------------------------


def _squash(text: str) -> str:
    return " ".join(text.replace("\\", "").split())


def test_troubleshooting_quotes_the_fixes_the_commands_print() -> None:
    from hwprof.collectors.callgrind.tool import INSTALL_FIX as VALGRIND_FIX
    from hwprof.collectors.gpu.nvml.collector import FIX as NVML_FIX
    from hwprof.collectors.perf_events.collector import UNKNOWN_FIX
    from hwprof.collectors.perf_sampling.access import INSTALL_FIX, permission_fix

    from hwprof.hardware.gpu_device import GPU_TORCH_INSTALL
    from hwprof.perf.open_errors import NO_PMU_FIX as COUNTER_NO_PMU_FIX
    from hwprof.perf.open_errors import explain
    from hwprof.sweep.ray_connect import INSTALL_FIX as RAY_FIX

    page = _squash((DOCS / "troubleshooting.md").read_text())
    paranoid_fix = explain(13)[1]  # EACCES
    for fix in (COUNTER_NO_PMU_FIX, permission_fix(), paranoid_fix, INSTALL_FIX, VALGRIND_FIX):
        assert _squash(fix) in page, fix
    for fix in (UNKNOWN_FIX, RAY_FIX, NVML_FIX, GPU_TORCH_INSTALL):
        assert _squash(fix) in page, fix


# --- the short commands, run -----------------------------------------------------------------------------------


IN_PROCESS = {"report", "trace"}
"""Commands run in the test's process (`hwprof.cli.main.main`, what `python -m hwprof` runs; their output read
from the file descriptors): a process of their own spent ~1 of its ~1.5 CPU-s starting and importing the analysis
and the renderers again for each line. tests/test_cli.py runs `hwprof report` in a fresh process. The commands
that name no run, doctor (which probes every collector) and models, still run in processes of their own."""


def _hwprof(
    words: list[str], cwd: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> subprocess.CompletedProcess[str]:
    if words[0] in IN_PROCESS:
        from hwprof.cli.main import main

        with monkeypatch.context() as patch:
            patch.chdir(cwd)
            patch.setenv("COLUMNS", "120")
            capfd.readouterr()
            code = main(list(words))
            out, err = capfd.readouterr()
        return subprocess.CompletedProcess(["hwprof", *words], code, out, err)
    return subprocess.run(
        [sys.executable, "-P", "-m", "hwprof", *words],
        cwd=cwd, capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "120"},
    )  # fmt: skip


RUN_PLACEHOLDERS = ("results/<run-id>", "results/<run>", "RUN_DIR", "RUN")


def _runnable(run_dir: Path) -> list[tuple[list[Shown], list[str]]]:
    """The shown lines of a short command, their run placeholders replaced by `run_dir`: each command once, with
    every line that shows it (pages repeat `hwprof report RUN`: the same words run the same way); a line whose
    paths do not exist after that (a GPU run's folder, results/A) is parsed only."""
    found: dict[tuple[str, ...], list[Shown]] = {}
    for shown in ALL_SHOWN:
        if shown.words[0] not in RUNNABLE or "--peaks" in shown.words or any("cuda" in w for w in shown.words):
            continue  # measuring peaks is not short; a GPU's lines need a GPU
        words = [str(run_dir) if w in RUN_PLACEHOLDERS else w for w in shown.words]
        args = parse_command(words)
        if getattr(args, "run_dir", None) is not None and not Path(args.run_dir).is_dir():
            continue
        if getattr(args, "out", None) is not None:
            continue  # written elsewhere than the run: the README's example path
        found.setdefault(tuple(words), []).append(shown)
    return [(shown, list(words)) for words, shown in found.items()]


def _lines(shown: list[Shown]) -> str:
    return "\n".join(map(str, shown))


@pytest.fixture
def recorded_run(tmp_path: Path) -> Path:
    """A copy of a real recorded run (yolov8n at 256: tests/fixtures/rundir_report)."""
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run, ignore=shutil.ignore_patterns("golden", "README.md"))
    return run


def test_the_short_commands_shown_run_on_a_recorded_run(
    recorded_run: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = []
    for shown, words in _runnable(recorded_run):
        if words[0] == "trace":
            continue  # the recorded run keeps no raw records (the slow test below traces a real one)
        done = _hwprof(words, tmp_path, capfd, monkeypatch)
        assert done.returncode == 0, f"{_lines(shown)}\n{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stdout + done.stderr, _lines(shown)
        ran.append(words[0])
    assert {"models", "doctor", "report"} <= set(ran), ran


@pytest.mark.slow
def test_the_short_commands_shown_run_on_a_tiny_collect(
    tmp_path: Path, tmp_path_factory, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real collect of yolov8n at 64 (the suite's stored small run: timing, layers and trace passes), then every
    short command the docs show on it (those that name no run, models and doctor, ran on the recorded run)."""
    stored = stored_run(tmp_path_factory, "small", tmp_path / "tiny")
    assert stored.returncode == 0, stored.stdout + stored.stderr
    run = stored.path
    ran = []
    for shown, words in _runnable(run):
        if str(run) not in words:
            continue  # models, doctor: the same words ran in the test above
        done = _hwprof(words, tmp_path, capfd, monkeypatch)
        assert done.returncode == 0, f"{_lines(shown)}\n{done.stdout}\n{done.stderr}"
        ran.append(words[0])
    assert "trace" in ran and "report" in ran
    assert (run / "trace.pftrace").stat().st_size > 0


def test_the_docs_speak_to_users_not_of_the_projects_history() -> None:
    """Issue 68: "before issue 41", "issue 46 saw": the manual names no issue of the project's (development.md,
    the developers' page, may)."""
    said = [
        f"{page.name}:{number}: {line.strip()}"
        for page in sorted(DOCS.glob("*.md"))
        if page.name != "development.md"
        for number, line in enumerate(page.read_text().splitlines(), start=1)
        if re.search(r"\bissues? \d", line, re.IGNORECASE)
    ]
    assert not said, said
