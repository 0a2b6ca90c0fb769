"""The command line's own mistakes (issue 68): argparse's errors are one line on stderr naming the command they are
about, with "did you mean" where a name is close and the help to read, exit 2 (no 21-line usage first)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hwprof.cli.args import build_parser


def hwprof(*words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-P", "-m", "hwprof", *words], capture_output=True, text=True, timeout=120)


UNKNOWN = "unrecognized arguments:"
CASES = [
    (["collect", "--imgsz", "abc"], "collect: argument --imgsz: invalid int value: 'abc'"),
    (["reprot", "results/x"], "argument COMMAND: invalid choice 'reprot' (did you mean report?)"),
    (["collect", "--modle", "yolov8n"], f"collect: {UNKNOWN} --modle yolov8n (did you mean --model?)"),
    (["report", "r", "--fromat", "json"], f"report: {UNKNOWN} --fromat json (did you mean --format?)"),
    (["report", "r", "--format", "jsn"], "report: argument --format: invalid choice 'jsn' (did you mean json?)"),
    (["sweep", "--models", "yolov8n", "--threads", "x"], "sweep: argument --threads: invalid value: 'x'"),
]


@pytest.mark.parametrize(("words", "said"), CASES)
def test_a_usage_mistake_is_one_line_with_a_suggestion_and_the_help_to_read(words: list[str], said: str) -> None:
    done = hwprof(*words)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and not done.stdout, done.stderr
    assert lines[0].startswith(f"hwprof: error: {said}"), lines[0]
    command = "hwprof" if said.startswith("argument COMMAND") else f"hwprof {said.split(':')[0]}"
    assert lines[0].endswith(f"; see `{command} --help`"), lines[0]


def test_nothing_close_suggests_nothing() -> None:
    done = hwprof("collect", "--zzzzzz")
    assert done.returncode == 2 and "did you mean" not in done.stderr and "--zzzzzz" in done.stderr


def test_the_parser_still_parses_and_helps() -> None:
    args = build_parser().parse_args(["collect", "--imgsz", "320"])
    assert args.imgsz == 320
    done = hwprof("collect", "--help")
    assert done.returncode == 0 and done.stdout.startswith("usage: hwprof collect")
