"""One front door: the command line's options and the library's keywords make the same typed request
(hwprof.api.requests), which the same code then runs (hwprof.api.collecting, hwprof.api.advising)."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any

import pytest

from hwprof.api import commands
from hwprof.api.requests import AdviseRequest, CollectRequest, gate_options
from hwprof.cli.collect import collect_request
from hwprof.cli.main import parse_command

CASES: list[tuple[dict[str, Any], list[str]]] = [
    (
        {"model": "yolov8n", "imgsz": 160, "only": ["timing", "flops"], "channels_last": True, "threads": 1,
         "events": ["task-clock"], "timeout": 60.0, "pyspy_rate": 50},
        ["--model", "yolov8n", "--imgsz", "160", "--only", "timing,flops", "--channels-last", "--threads", "1",
         "--events", "task-clock", "--timeout", "60", "--pyspy-rate", "50"],
    ),
    (
        {"model": "yolov7", "rect": True, "weights": "w.pt", "images": "imgs", "threads": 2, "depth": 2},
        ["--model", "yolov7", "--rect", "--weights", "w.pt", "--images", "imgs", "--threads", "2", "--depth", "2"],
    ),
    (
        {"program": ["python", "x.py", "--n", "3"], "program_model": "m", "stage": ["nms=x:f"], "program_end": "run",
         "program_stdin": "x.py", "threads": 1},
        ["--program-model", "m", "--stage", "nms=x:f", "--program-end", "run", "--program-stdin", "x.py", "--threads",
         "1", "--", "python", "x.py", "--n", "3"],
    ),
    (
        {"model": "yolov8n", "advise": True, "advise_blocks": 4, "advise_only": ["onnxruntime"], "out": "o",
         "results": "r", "report": True, "threads": 1},
        ["--model", "yolov8n", "--advise", "--advise-blocks", "4", "--advise-only", "onnxruntime", "--out", "o",
         "--results", "r", "--threads", "1"],
    ),
]  # fmt: skip


def from_keywords(options: dict[str, Any]) -> CollectRequest:
    bound = inspect.signature(commands.collect).bind(**options)
    bound.apply_defaults()
    return commands._collect_request(dict(bound.arguments))


def from_words(words: list[str], report: bool) -> CollectRequest:
    return collect_request(parse_command(["collect", *([] if report else ["--no-report"]), *words]))


@pytest.mark.parametrize(("options", "words"), CASES)
def test_the_same_options_make_the_same_request_through_either_door(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: dict[str, Any], words: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.py").write_text("print(1)\n")
    api = from_keywords(options)
    cli = from_words(words, report=bool(options.get("report")))
    assert dataclasses.replace(api, command_line=()) == dataclasses.replace(cli, command_line=())
    assert api.config.model == (options.get("model") or "yolov7")
    assert api.command_line[0].startswith("hwprof.collect(") and "threads=" in api.command_line[0]


def test_a_changed_default_shows_in_the_request() -> None:
    """The comparison above can fail: a value the command line did not give differs."""
    api = from_keywords({"model": "yolov8n", "imgsz": 320, "threads": 1})
    cli = from_words(["--model", "yolov8n", "--threads", "1"], report=False)
    assert api.config.imgsz == 320 and cli.config.imgsz == 640 and api != cli


def test_the_advise_request_refuses_what_no_advise_can_run() -> None:
    assert AdviseRequest().blocks == 8 and AdviseRequest().layers
    for blocks, line in ((0, "--blocks must be at least 1 (got 0)"), ("4", "--blocks must be an integer (got '4')")):
        with pytest.raises(ValueError, match=line.replace("(", r"\(").replace(")", r"\)")):
            AdviseRequest(blocks=blocks)  # type: ignore[arg-type]


def test_the_gate_options_are_checked_alike_for_both_doors() -> None:
    opts = gate_options("5%", share=2, confidence="90%")
    assert (opts.fail_above, opts.share, opts.confidence) == (0.05, 0.02, 0.9)
    for kwargs, words in (
        ({"unresolved": "maybe"}, "--unresolved is 'pass' or 'fail'"),
        ({"gate_on": "all"}, "--gate-on is 'both' or 'time' or 'counts'"),
        ({"resamples": 10}, "--resamples must be at least 100"),
        ({"confidence": "40%"}, "--confidence must be between 50% and 100%"),
        ({"paired": 3}, "--paired needs at least 5 ABBA blocks"),
    ):
        with pytest.raises(ValueError, match=words):
            gate_options("5%", **kwargs)
