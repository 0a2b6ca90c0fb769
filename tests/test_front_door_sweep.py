"""One front door for a sweep and a compare: the command line's options and the library's keywords
(hwprof.run_sweep, hwprof.gate) make the same typed request (hwprof.api.sweeping.SweepRequest,
hwprof.api.requests.CompareRequest), refuse a bad value with the same line, and run it with the same code."""

from __future__ import annotations

import dataclasses
import inspect
import io
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from test_analysis import make_run

import hwprof
from hwprof.analysis.sweep.rows import SweepPoint
from hwprof.api import commands
from hwprof.api.requests import CompareRequest
from hwprof.api.sweeping import SweepRequest
from hwprof.cli.gate_args import compare_request
from hwprof.cli.main import main, parse_command
from hwprof.cli.sweep import sweep_request
from hwprof.sweep import points as sweep_mod

SWEEPS: list[tuple[dict[str, Any], list[str]]] = [
    (
        {"models": ["yolov8n", "yolov7-tiny"], "runtimes": ["torch", "onnxruntime"], "precisions": ["fp32", "int8"],
         "threads": [1, 4], "batch": [1, 8], "imgsz": 320, "iters": 7, "warmup": 2, "timeout": 90.0, "out": "sw",
         "advise": True, "collect_args": ["--only", "timing,flops"], "format": "markdown"},
        ["--models", "yolov8n,yolov7-tiny", "--runtimes", "torch,onnxruntime", "--precisions", "fp32,int8",
         "--threads", "1,4", "--batch", "1,8", "--imgsz", "320", "--iters", "7", "--warmup", "2", "--timeout", "90",
         "--out", "sw", "--advise", "--format", "markdown", "--", "--only", "timing,flops"],
    ),
    (
        {"models": "yolov8n", "ray": "auto", "per_host": True, "hosts": ["epyc", "xeon"], "device": "cpu"},
        ["--models", "yolov8n", "--ray", "auto", "--per-host", "--hosts", "epyc,xeon"],
    ),
    ({"resume": "old-sweep", "local": True, "advise": True}, ["--resume", "old-sweep", "--local", "--advise"]),
]  # fmt: skip


def sweep_from_keywords(options: dict[str, Any]) -> SweepRequest:
    bound = inspect.signature(commands.run_sweep).bind(**options)
    bound.apply_defaults()
    return commands._sweep_request(dict(bound.arguments))


def sweep_from_words(words: list[str]) -> SweepRequest:
    return sweep_request(parse_command(["sweep", *words]))


@pytest.mark.parametrize(("options", "words"), SWEEPS)
def test_the_same_sweep_options_make_the_same_request_through_either_door(
    options: dict[str, Any], words: list[str]
) -> None:
    api, cli = sweep_from_keywords(options), sweep_from_words(words)
    assert api == cli
    assert isinstance(api.models, tuple) and isinstance(api.out, Path)
    assert api.plan().points() == cli.plan().points() if api.resume is None else api.resume == Path("old-sweep")


def test_a_changed_sweep_default_shows_in_the_request() -> None:
    """The comparison above can fail: a value the command line did not give differs."""
    api = sweep_from_keywords({"models": ["yolov8n"], "imgsz": 320})
    cli = sweep_from_words(["--models", "yolov8n"])
    assert api.imgsz == 320 and cli.imgsz == 640 and api != cli
    assert dataclasses.replace(api, imgsz=640) == cli


def _cli_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    out = capsys.readouterr().err.strip()
    assert out.startswith("hwprof: error: ") and "\n" not in out
    return out.removeprefix("hwprof: error: ")


@pytest.mark.parametrize(
    ("options", "words", "line"),
    [
        ({}, [], "sweep needs --models (or --resume DIR)"),
        ({"models": ["yolov8n"], "per_host": True}, ["--models", "yolov8n", "--per-host"], "--per-host and --hosts"),
        ({"models": ["yolov8n"], "threads": [0]}, ["--models", "yolov8n", "--threads", "0"], "must be at least 1"),
        (
            {"models": ["yolov8n"], "runtimes": ["onnxruntime"], "precisions": ["bf16"]},
            ["--models", "yolov8n", "--runtimes", "onnxruntime", "--precisions", "bf16"],
            "no runtime in onnxruntime runs a precision in bf16",
        ),
        (
            {"resume": "x", "models": ["yolov8n"]},
            ["--resume", "x", "--models", "yolov8n"],
            "--resume DIR runs the points of the sweep recorded in DIR: give no --models",
        ),
        (
            {"models": ["yolov8n"], "collect_args": ["--model", "yolov7"]},
            ["--models", "yolov8n", "--", "--model", "yolov7"],
            "--model is set by the sweep for each point",
        ),
    ],
)
def test_a_bad_sweep_value_is_the_same_line_through_either_door(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    options: dict[str, Any], words: list[str], line: str,
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    cli = _cli_error(capsys, ["sweep", *words])
    with pytest.raises(ValueError) as refused:
        hwprof.run_sweep(**options)
    assert str(refused.value) == cli and line in cli
    assert list(tmp_path.iterdir()) == []  # refused before anything was written


def test_a_library_value_of_the_wrong_type_names_its_option() -> None:
    for options, line in (
        ({"models": ["yolov8n"], "imgsz": "640"}, "--imgsz must be an integer (got '640')"),
        ({"models": ["yolov8n"], "threads": ["1"]}, "--threads is a list of integers (got ['1'])"),
        ({"models": ["yolov8n"], "collect_args": "--iters 3"}, "--collect-args is a list of strings"),
        ({"models": ["yolov8n"], "format": "csv"}, "--format must be one of rich, markdown, html (got 'csv')"),
    ):
        with pytest.raises(ValueError, match=line.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
            hwprof.run_sweep(**options)


def test_both_doors_run_the_same_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The library's sweep collects the points (a stand-in collect copies a prepared run) and returns the table;
    the command line's, given the same options, finds each point complete and reuses it."""
    template = make_run(tmp_path / "template")
    calls: list[str] = []

    def command(point: SweepPoint, out: Path, *_args: object) -> list[str]:
        calls.append(point.name)
        code = "import shutil, sys; shutil.copytree(sys.argv[1], sys.argv[2])"
        return [sys.executable, "-c", code, str(template), str(out)]

    monkeypatch.setattr(sweep_mod, "collect_command", command)
    out = tmp_path / "sweep"
    printed = io.StringIO()
    result = hwprof.run_sweep(
        ["yolov8n"], threads=[1, 2], out=out, format="markdown", console=Console(file=printed, width=120)
    )
    assert [(r.threads, r.status) for r in result.rows] == [(1, "complete"), (2, "complete")]
    assert calls == ["yolov8n-t1-b1", "yolov8n-t2-b1"] and "| yolov8n |" in printed.getvalue()
    assert main(["sweep", "--models", "yolov8n", "--threads", "1,2", "--out", str(out), "--format", "html"]) == 0
    assert len(calls) == 2 and (out / "sweep.html").is_file()


GATE_WORDS = [
    "--fail-above", "4%", "--gate-share", "1%", "--unresolved", "fail", "--confidence", "90%", "--resamples", "500",
    "--seed", "3", "--count-threshold", "1%", "--miss-threshold", "2%", "--gate-on", "time", "--layer-stat", "ms",
    "--gate-different", "--paired", "6", "--gate-report", "r.md", "--junit", "j.xml", "--gate-json", "g.json",
]  # fmt: skip
GATE_KEYWORDS: dict[str, Any] = {
    "fail_above": "4%", "share": "1%", "unresolved": "fail", "confidence": "90%", "resamples": 500, "seed": 3,
    "count_threshold": "1%", "miss_threshold": "2%", "gate_on": "time", "layer_stat": "ms", "gate_different": True,
    "paired": 6, "gate_report": "r.md", "junit": "j.xml", "gate_json": "g.json",
}  # fmt: skip


def gate_from_keywords(base: str, new: str, options: dict[str, Any]) -> CompareRequest:
    bound = inspect.signature(commands.gate).bind(base, new, **options)
    bound.apply_defaults()
    return commands._gate_request(dict(bound.arguments))


def compare_from_words(words: list[str]) -> CompareRequest:
    return compare_request(parse_command(["compare", *words]))


def test_the_same_gate_options_make_the_same_request_through_either_door() -> None:
    api = gate_from_keywords("A", "B", GATE_KEYWORDS)
    cli = compare_from_words(["A", "B", *GATE_WORDS])
    assert api == cli and api.gate is not None and api.paired == 6
    assert (api.gate.fail_above, api.gate.share, api.gate.layer_stat) == (pytest.approx(0.04), 0.01, "ms")
    assert api.outputs.junit == Path("j.xml")
    plain = gate_from_keywords("A", "B", {})
    assert plain == compare_from_words(["A", "B", "--fail-above", "5%"]) and plain != api
    assert compare_from_words(["A", "B", "C"]) == CompareRequest((Path("A"), Path("B"), Path("C")))


@pytest.mark.parametrize(
    ("options", "words", "line"),
    [
        ({"paired": 3}, ["--paired", "3"], "--paired needs at least 5 ABBA blocks (got 3)"),
        ({"confidence": "40%"}, ["--confidence", "40%"], "--confidence must be between 50% and 100% (got 40%)"),
        ({"resamples": 10}, ["--resamples", "10"], "--resamples must be at least 100 (got 10)"),
        ({"fail_above": "five"}, [], "--fail-above"),
    ],
)
def test_a_bad_gate_value_is_the_same_line_through_either_door(
    capsys: pytest.CaptureFixture[str], options: dict[str, Any], words: list[str], line: str
) -> None:
    """Refused before either door reads a run (A and B do not exist)."""
    fail_above = options.get("fail_above", "5%")
    cli = _cli_error(capsys, ["compare", "A", "B", "--fail-above", fail_above, *words])
    with pytest.raises(ValueError) as refused:
        hwprof.gate("A", "B", **{"fail_above": "5%", **options})
    assert str(refused.value) == cli and line in cli


def test_compare_refusals_of_the_request() -> None:
    for kwargs, line in (
        ({"runs": (Path("A"),)}, "compare needs at least two run directories"),
        ({"runs": ("A", "B"), "top": 0}, "--top must be at least 1 (got 0)"),
        ({"runs": ("A", "B"), "format": "csv"}, "--format must be one of rich, markdown, json, html (got 'csv')"),
        ({"runs": ("A", "B"), "junit": Path("j.xml")}, "--junit needs --fail-above PCT"),
    ):
        with pytest.raises(ValueError, match=line.replace("(", r"\(").replace(")", r"\)")):
            CompareRequest(**kwargs)
    gate = commands.gate_options("5%")
    with pytest.raises(ValueError, match=r"--fail-above gates two runs, BASE and NEW \(got 3\)"):
        CompareRequest((Path("A"), Path("B"), Path("C")), gate=gate)
    with pytest.raises(ValueError, match=r"--paired gates two runs, BASE and NEW \(got 3\)"):
        CompareRequest((Path("A"), Path("B"), Path("C")), gate=gate, paired=5)


def test_the_cluster_options_reach_the_ray_runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--ray, --per-host and --hosts (or the library's ray=, per_host=, hosts=) are the Ray runner's options; a
    resumed sweep's recorded ones fill in what is not given. No cluster: the runner is a stand-in."""
    from hwprof.analysis.sweep.rows import SweepResult
    from hwprof.sweep import ray as ray_mod
    from hwprof.sweep.points import SweepPlan
    from hwprof.sweep.ray_plan import RayOptions
    from hwprof.sweep.resume import write_plan_json

    asked: list[RayOptions] = []

    def connect_runner(_plan: object, options: RayOptions, _notice: object) -> object:
        asked.append(options)

        def run(plan: SweepPlan, _progress: object) -> SweepResult:
            Path(plan.out_root).mkdir(parents=True, exist_ok=True)
            return SweepResult([], plan.out_root)

        return run

    monkeypatch.setattr(ray_mod, "connect_runner", connect_runner)
    out = tmp_path / "s"
    hwprof.run_sweep(
        ["yolov8n"], ray="10.0.0.1:6379", per_host=True, hosts="epyc", out=out, console=Console(file=io.StringIO())
    )
    assert asked == [RayOptions("10.0.0.1:6379", per_host=True, hosts=("epyc",))]
    plan = sweep_from_words(["--models", "yolov8n", "--ray", "auto", "--out", str(out)]).plan()
    write_plan_json(out, plan.to_dict(), RayOptions("10.0.0.2:6379", hosts=("xeon",), max_retries=4).to_dict())
    assert main(["sweep", "--resume", str(out)]) == 0
    assert asked[1] == RayOptions("10.0.0.2:6379", hosts=("xeon",), max_retries=4)
    monkeypatch.setattr(sweep_mod, "collect_command", lambda *_args: [sys.executable, "-c", "raise SystemExit(3)"])
    assert main(["sweep", "--resume", str(out), "--local"]) == 1 and len(asked) == 2  # run here: its point failed
