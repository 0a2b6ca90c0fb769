"""`hwprof models`: the catalogue is built once per torch/ultralytics/hwprof version and cached; its first call
builds every model (about a minute on 2 CPUs), and says so where no progress bar can be drawn (issue 68: it ran
silent for 70 s). A model described here is a stand-in row: what is tested is which models are built and said."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from hwprof.cli.main import main
from hwprof.workload import catalog
from hwprof.workload.catalog import MODEL_NAMES, ModelRow, model_catalog


def _row(name: str, imgsz: int) -> ModelRow:
    return ModelRow(name, "stand-in", 1, 1, 1, imgsz, imgsz / 1e9)


def test_only_the_models_built_now_are_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    built: list[str] = []
    monkeypatch.setattr(catalog, "describe", lambda name, imgsz: built.append(name) or _row(name, imgsz))
    steps: list[tuple[int, int, str]] = []
    first = model_catalog(64, lambda done, total, name: steps.append((done, total, name)))
    assert [r.name for r in first] == list(MODEL_NAMES) == built == [s[2] for s in steps]
    assert steps[0] == (0, len(MODEL_NAMES), MODEL_NAMES[0])
    steps.clear()
    again = model_catalog(64, lambda done, total, name: steps.append((done, total, name)))
    assert again == first and steps == [] and len(built) == len(MODEL_NAMES)  # from the cache: no step


def test_a_first_call_without_a_terminal_says_each_model_on_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(catalog, "describe", _row)
    assert main(["models", "--imgsz", "64"]) == 0
    first = capsys.readouterr()
    said = [line for line in first.err.splitlines() if line.startswith("hwprof models: building ")]
    assert len(said) == len(MODEL_NAMES) and said[-1].endswith(f"({len(MODEL_NAMES)} of {len(MODEL_NAMES)})")
    assert MODEL_NAMES[0] in first.out  # the table
    assert main(["models", "--imgsz", "64"]) == 0
    assert "building" not in capsys.readouterr().err  # cached: nothing to say
    assert isinstance(Console(file=io.StringIO()).is_terminal, bool)
