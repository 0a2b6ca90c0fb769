"""`hwprof collect --config FILE` and `hwprof sweep --config FILE` (issue 60): a TOML or YAML file of options, the
command line over it, --dump-config's file giving the same options back, and each bad file refused in one line
naming the file, the line and the key (exit 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hwprof.cli.config_file import ConfigError
from hwprof.cli.main import parse_command

TOML = """model = "yolov8n"
imgsz = 96
iters = 3
only = ["timing", "flops"]
no-report = true
images = "pics"
"""


def hwprof(*words: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hwprof", *words], capture_output=True, text=True, timeout=300, cwd=cwd
    )


def test_the_files_options_become_the_commands_and_the_command_line_overrides_them(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text(TOML)
    args = parse_command(["collect", "--config", str(path), "--iters", "7"])
    assert (args.model, args.imgsz, args.iters, args.only, args.no_report) == (
        "yolov8n",
        96,
        7,
        ["timing", "flops"],
        True,
    )
    assert args.images == str(tmp_path / "pics")  # an input's path is the file's folder's
    assert args.config_file.text == TOML and args.config_file.format == "toml"
    plain = parse_command(["collect", "--iters", "7"])
    assert plain.config_file is None and plain.imgsz == 640


def test_yaml_gives_the_same_options_with_snake_case_keys_and_a_program(tmp_path: Path) -> None:
    path = tmp_path / "run.yml"
    path.write_text("model: yolov8n\nimgsz: 96\ncounter_reads: every\nprogram: [python, detect.py, --conf, 0.5]\n")
    args = parse_command(["collect", "--config", str(path)])
    assert (args.imgsz, args.counter_reads) == (96, "every")
    assert args.program == ["python", "detect.py", "--conf", "0.5"]
    given = parse_command(["collect", "--config", str(path), "--", "python", "mine.py"])
    assert given.program == ["python", "mine.py"]  # the command line's program wins


def test_a_sweep_file_takes_its_axes_as_lists_and_the_points_collect_options(tmp_path: Path) -> None:
    path = tmp_path / "sweep.toml"
    path.write_text(
        'models = ["yolov8n", "yolov7-tiny", "yolov5nu"]\nthreads = [1, 2]\nimgsz = 96\n'
        'collect-args = ["--only", "timing"]\n'
    )
    args = parse_command(["sweep", "--config", str(path)])
    assert args.models == ["yolov8n", "yolov7-tiny", "yolov5nu"] and args.threads == [1, 2] and args.imgsz == 96
    assert args.collect_args == ["--only", "timing"]
    from hwprof.cli.sweep import sweep_request

    request = sweep_request(args)
    assert len(request.plan().points()) == 6


def test_dump_config_gives_a_file_that_gives_the_same_options_back(tmp_path: Path) -> None:
    first = hwprof("collect", "--model", "yolov7-tiny", "--imgsz", "320", "--only", "timing,flops", "--dump-config")
    assert first.returncode == 0, first.stderr
    assert 'model = "yolov7-tiny"' in first.stdout and 'only = ["timing", "flops"]' in first.stdout
    path = tmp_path / "dumped.toml"
    path.write_text(first.stdout)
    again = hwprof("collect", "--config", str(path), "--dump-config")
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        ("a.toml", 'model = "yolov8n"\nimgsz = "big"\n', "a.toml:2: imgsz: an integer (got 'big')"),
        ("a.toml", "bogus = 3\n", "a.toml:1: bogus: not an option of `hwprof collect`"),
        ("a.toml", 'runtime = "tensorrt"\n', "a.toml:1: runtime: one of torch, onnxruntime, openvino (got 'tensorrt')"),
        ("a.toml", 'rect = "yes"\n', 'a.toml:1: rect: true or false (got "yes")'),
        ("a.toml", "imgsz = [1, 2]\n", "a.toml:1: imgsz: one value, not a list (got [1, 2])"),
        ("a.toml", "threads = true\n", "a.toml:1: threads: takes a value, not true"),
        ("a.toml", "config = 'b.toml'\n", "a.toml:1: config: not an option of `hwprof collect`"),
        ("a.toml", "imgsz = 96\nimgsz = 97\n", "a.toml: not valid TOML: Cannot overwrite a value (at line 2"),
        ("a.yaml", "model: yolov8n\nimgsz: [a\n", "a.yaml:3: not valid YAML: expected ',' or ']'"),
        ("a.yaml", "- a\n- b\n", "a.yaml: the file must hold option names and their values (got a list)"),
        ("a.yaml", "only: {a: 1}\n", "a.yaml:1: only: a value, not {"),
        ("a.json", "{}", "a.json: a config file is .toml, .yaml or .yml (got '.json')"),
    ],
)
def test_each_bad_file_is_one_line_naming_the_file_line_and_key_and_exit_2(
    tmp_path: Path, name: str, text: str, said: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    done = hwprof("collect", "--config", str(path))
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0] and str(tmp_path) in lines[0], done.stderr


def test_a_missing_or_unreadable_file_or_a_folder_is_one_line(tmp_path: Path) -> None:
    for path, said in ((tmp_path / "none.toml", "no such config file"), (tmp_path, "a config file is .toml")):
        done = hwprof("collect", "--config", str(path))
        assert done.returncode == 2 and said in done.stderr and len(done.stderr.strip().splitlines()) == 1
    folder = tmp_path / "dir.toml"
    folder.mkdir()
    done = hwprof("sweep", "--config", str(folder))
    assert done.returncode == 2 and "a folder, not a config file" in done.stderr, done.stderr


@pytest.mark.slow
def test_a_collect_from_a_file_keeps_the_files_text_in_run_json(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    text = 'model = "yolov8n"\nimgsz = 64\niters = 2\nwarmup = 1\nonly = ["timing"]\nno-report = true\n'
    path.write_text(text)
    out = tmp_path / "run"
    done = hwprof("collect", "--config", str(path), "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    run = json.loads((out / "run.json").read_text())
    assert run["config_file"] == {"path": str(path.resolve()), "format": "toml", "text": text}
    assert run["config"]["imgsz"] == 64 and run["config"]["iters"] == 2


def _alias_bomb() -> str:
    """The billion laughs in YAML: nine references per level, nine levels (9**9 strings once expanded)."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    return "only:\n" + "\n".join(f"  - {line.split(': ', 1)[1]}" for line in lines) + "\n"


@pytest.mark.parametrize(
    ("name", "make", "said"),
    [
        ("bomb.yaml", lambda p: p.write_text(_alias_bomb()), "aliases (*name) are not taken in a config file"),
        ("deep.toml", lambda p: p.write_text("only = " + "[" * 10_000 + "]" * 10_000 + "\n"), "nested deeper"),
        ("deep.yaml", lambda p: p.write_text("only: " + "[" * 50 + "]" * 50 + "\n"), "nested deeper"),
        ("big.toml", lambda p: p.write_text(f'model = "yolov8n"\n# {"x" * (2 << 20)}\n'), "larger than a config"),
        ("fifo.toml", lambda p: os.mkfifo(p), "not a regular file"),
    ],
)
def test_a_hostile_file_is_refused_in_one_line_within_bounds(tmp_path: Path, name: str, make: Any, said: str) -> None:
    """Issue 67: an alias bomb ran 47 s to a MemoryError, a FIFO hung for ever, 10,000 levels of TOML gave a
    RecursionError traceback and 50 MB were copied into run.json: each is one line (the timeout is the hang's
    failure)."""
    path = tmp_path / name
    make(path)
    done = subprocess.run(
        [sys.executable, "-m", "hwprof", "collect", "--config", str(path)], capture_output=True, text=True, timeout=60
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and said in lines[0] and str(path) in lines[0], done.stderr[-800:]
    assert not (tmp_path / "results").exists()


def test_a_byte_order_mark_is_taken_off_and_a_long_value_is_quoted_short(tmp_path: Path) -> None:
    path = tmp_path / "bom.toml"
    path.write_text("\ufeff" + TOML, encoding="utf-8")
    assert parse_command(["collect", "--config", str(path)]).imgsz == 96
    long = tmp_path / "long.yaml"
    long.write_text("only: [" + ", ".join(f"[{'x' * 200}, {i}]" for i in range(2_000)) + "]\n")
    with pytest.raises(ConfigError) as refused:
        parse_command(["collect", "--config", str(long)])
    said = str(refused.value)
    assert "a list of names or numbers (got [[" in said and len(said) < len(str(long)) + 160, said
