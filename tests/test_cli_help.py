"""The command line explains itself (issue 57): `hwprof --help` says what hwprof is with examples and the exit
statuses, `--version` gives hwprof's, torch's and Python's versions, collect's options come in groups, every
command has a description and examples; errors go to stderr, reports to stdout, and a closed pipe ends a
command quietly with exit 0."""

from __future__ import annotations

import argparse
import io
import os
import platform
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from hwprof.cli.args import build_parser
from hwprof.cli.exit_codes import EXIT_CODES
from hwprof.cli.streams import CommandConsole, ErrorConsole

FIXTURE = Path(__file__).parent / "fixtures" / "rundir_small"
ENV = {**os.environ, "COLUMNS": "100"}
COLLECT_GROUPS = (
    "input",
    "model and runtime",
    "measurement",
    "passes and collectors",
    "counters",
    "your own program",
    "output",
    "config file",
    "advice",
)


def hwprof(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "hwprof", *args], capture_output=True, text=True, env=ENV, timeout=120, **kwargs
    )  # type: ignore[call-overload]


@pytest.fixture
def run_copy(tmp_path: Path) -> Path:
    """A run directory to report (report refreshes its files: never the fixture itself)."""
    return Path(shutil.copytree(FIXTURE, tmp_path / "run"))


def test_hwprof_help_says_what_it_is_with_three_examples_and_the_exit_statuses() -> None:
    done = hwprof("--help")
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    text = done.stdout
    assert "hwprof's command line" not in text and "hwprof.cli" not in text  # no developer's docstring
    prose = " ".join(text.split())
    assert "hwprof profiles YOLO inference" in prose and "Perfetto trace" in prose and "energy" in prose
    examples = re.findall(r"^    (hwprof .+)$", text, flags=re.MULTILINE)
    assert len(examples) == 3, text
    assert examples[0].startswith("hwprof collect --model ")
    assert examples[1].startswith("hwprof collect -- python ")
    assert examples[2].startswith("hwprof compare ") and "--fail-above" in examples[2]
    assert "`hwprof help exit-codes` says each" in " ".join(text.split())  # one line; the table is a topic
    assert all(len(line) <= 100 for line in text.splitlines()), max(text.splitlines(), key=len)


def test_help_gives_the_exit_statuses_table_and_each_commands_help() -> None:
    """Issue 68: the exit statuses took 22 of `hwprof --help`'s 61 lines; they are `hwprof help exit-codes`."""
    table = hwprof("help", "exit-codes")
    assert table.returncode == 0 and table.stdout.startswith("exit status:")
    codes = re.findall(r"^  (\d+) ", table.stdout, flags=re.MULTILINE)
    assert [int(c) for c in codes] == [e.code for e in EXIT_CODES]
    assert hwprof("help", "collect").stdout == hwprof("collect", "--help").stdout
    assert hwprof("help").stdout == hwprof("--help").stdout
    wrong = hwprof("help", "reprot")
    assert wrong.returncode == 2 and "did you mean report?" in wrong.stderr
    assert len(wrong.stderr.strip().splitlines()) == 1


def test_collect_help_groups_its_options_and_ends_with_examples() -> None:
    done = hwprof("collect", "--help")
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    text = done.stdout
    titles = re.findall(r"^([a-z][a-z ]+):$", text, flags=re.MULTILINE)
    assert titles == ["options", *COLLECT_GROUPS, "examples"], titles
    sections = dict(zip(titles, re.split(r"^[a-z][a-z ]+:$", text, flags=re.MULTILINE)[1:], strict=True))
    assert re.findall(r"^  (-\S+)", sections["options"], flags=re.MULTILINE) == ["-h,"]  # nothing left ungrouped
    assert "--imgsz" in sections["input"] and "--source" in sections["input"]
    assert "--weights" in sections["model and runtime"] and "--iters" in sections["measurement"]
    assert "--counter-threads" in sections["counters"] and "--program-model" in sections["your own program"]
    assert "--advise-blocks" in sections["advice"] and "--no-report" in sections["output"]
    assert "--track" in sections["output"] and "--dump-config" in sections["config file"]
    assert text.rstrip().splitlines()[-1].lstrip().startswith("hwprof collect ")
    assert "results/<model>-<time>/" in text and "run.json" in text and "trace.pftrace" in text


def test_every_command_says_what_it_does_and_shows_examples() -> None:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    listed = {choice.dest for choice in sub._choices_actions}
    assert listed == set(sub.choices), "every command has its line in `hwprof --help`"
    for name, command in sub.choices.items():
        assert command.description and len(command.description.split()) >= 15, name
        assert command.epilog and f"hwprof {name} " in command.epilog, name
        assert "hwprof." not in command.format_help(), f"{name}'s help names a module"


def test_the_groups_keep_every_dest_and_default() -> None:
    """The library and the tests read collect's options by dest: the groups change none of them."""
    args = build_parser().parse_args(["collect"])
    assert (args.images, args.imgsz, args.blocks, args.advise_only, args.no_layers) == (None, 640, 8, "", False)
    args = build_parser().parse_args(["collect", "--source", "v.mp4", "--advise-blocks", "3", "--counters", "papi"])
    assert (args.images, args.blocks, args.counters) == ("v.mp4", 3, "papi")


def test_the_librarys_raising_parser_class_reaches_every_command() -> None:
    class Raising(argparse.ArgumentParser):
        def error(self, message: str) -> None:  # type: ignore[override]
            raise ValueError(message)

    with pytest.raises(ValueError, match="--imgsz: invalid int value"):
        build_parser(parser_class=Raising).parse_args(["collect", "--imgsz", "x"])


def test_version_prints_hwprofs_torchs_and_pythons_without_importing_torch() -> None:
    script = (
        "import sys\nfrom hwprof.cli.main import main\n"
        "try:\n    main(['--version'])\n"
        "except SystemExit as exc:\n    print('exit', exc.code, 'torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-P", "-c", script], capture_output=True, text=True, timeout=120)
    assert done.stderr == "", done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"hwprof {metadata.version('hwprof')}"
    assert lines[1] == f"torch {metadata.version('torch')}"
    assert lines[2].startswith(f"Python {platform.python_version()} ({platform.python_implementation()}) on ")
    assert lines[2].endswith(platform.platform())
    assert lines[3] == "exit 0 False", lines[3]
    done = hwprof("--version")
    assert (done.returncode, done.stdout.splitlines()) == (0, lines[:3])


def test_an_error_goes_to_stderr_and_nothing_to_stdout() -> None:
    done = hwprof("report", "/nonexistent")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("hwprof: error: /nonexistent ") and len(done.stderr.splitlines()) == 1


def test_library_errors_warnings_and_stops_go_to_the_error_console() -> None:
    out, err = io.StringIO(), io.StringIO()
    errors = ErrorConsole(file=err, width=200)
    console = CommandConsole(errors, file=out, width=200)
    console.print("[red]hwprof: error:[/] a pass failed", highlight=False)
    console.print("[yellow]warning:[/] 2 images unreadable", highlight=False)
    console.print("[red]interrupted[/] by SIGTERM", highlight=False)
    console.print("collecting into [bold]run[/]: passes timing")
    console.print("[red]slow[/] layer")
    assert err.getvalue().splitlines() == ["hwprof: error: a pass failed", "warning: 2 images unreadable",
                                           "interrupted by SIGTERM"]  # fmt: skip
    assert out.getvalue().splitlines() == ["collecting into run: passes timing", "slow layer"]


def _into_closed_pipe(*args: str) -> subprocess.CompletedProcess[str]:
    """hwprof with its standard output a pipe whose reader has gone before it writes (deterministic, where
    `| head` races with the writer)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-P", "-m", "hwprof", *args],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
            timeout=300,
        )
    finally:
        os.close(write)


@pytest.mark.parametrize(
    "args",
    [["--help"], ["collect", "--help"], ["--version"], ["report", "RUN"], ["report", "RUN", "--format", "json"]],
    ids=["help", "collect-help", "version", "report", "report-json"],
)
def test_a_closed_pipe_ends_quietly_with_exit_0(args: list[str], run_copy: Path) -> None:
    done = _into_closed_pipe(*[str(run_copy) if a == "RUN" else a for a in args])
    assert (done.returncode, done.stderr) == (0, ""), done.stderr[-3000:]


def test_report_into_head_exits_0_with_nothing_on_stderr(run_copy: Path, tmp_path: Path) -> None:
    command = f"set -o pipefail; {sys.executable} -P -m hwprof report {run_copy} 2>{tmp_path / 'err'} | head -1"
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=ENV, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("summary of run ") and len(done.stdout.splitlines()) == 1
    assert (tmp_path / "err").read_text() == ""


def test_every_exit_status_in_the_table_cites_tests_that_exist() -> None:
    """hwprof.cli.exit_codes says, for each status, which tests observe it: the files it names exist, and each
    status of EXIT_CODES is there."""
    import hwprof.cli.exit_codes as exit_codes

    doc = exit_codes.__doc__ or ""
    cited = set(re.findall(r"tests/(test_\w+\.py)", doc))
    missing = [name for name in cited if not (Path(__file__).parent / name).exists()]
    assert cited and not missing, missing
    for row in EXIT_CODES:
        assert re.search(rf"\b{row.code}\b", doc), f"exit status {row.code} is not in the module docstring"


def test_only_lists_the_collectors_names_from_the_registry() -> None:
    """Issue 68: `--only` did not list the collectors' names; they come from the registry when the help is printed
    (not when the parser is built: every command builds it)."""
    from hwprof.session.registry import all_collectors

    text = " ".join(hwprof("collect", "--help").stdout.split())
    at = text.index("--only ONLY")
    names = [c.name for c in all_collectors()]
    assert all(name in text[at : at + 400] for name in names), text[at : at + 400]
    assert "{collectors}" not in text
