"""A collector's metrics.json (per-layer and per-stage metric tables) is checked when it is read: a damaged
table gives one line naming the file and the field, as a damaged run.json does (tests/test_schema_run.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hwprof.rundir.reader import RunData
from hwprof.schema.check import RunDirError
from hwprof.schema.records import MetricTables

FIXTURES = Path(__file__).parent / "fixtures"


def _metrics_files() -> list[Path]:
    return sorted(FIXTURES.rglob("*.metrics.json"))


def test_every_fixture_table_reads_back_unchanged() -> None:
    files = _metrics_files()
    assert len(files) >= 5
    for path in files:
        tables = MetricTables.load(path)
        assert json.loads(json.dumps(tables.__dict__)) == json.loads(path.read_text()), path


def _damaged(tmp_path: Path, change: object) -> Path:
    source = FIXTURES / "rundir_small"
    run_dir = tmp_path / "run"
    shutil.copytree(source, run_dir)
    path = run_dir / "passes" / "layers" / "perf_events.metrics.json"
    doc = json.loads(path.read_text())
    change(doc)  # type: ignore[operator]
    path.write_text(json.dumps(doc))
    return run_dir


def _first_layer(doc: dict) -> tuple[str, str]:
    layer = next(iter(doc["layers"]))
    return layer, next(iter(doc["layers"][layer]))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["layers"][_first_layer(d)[0]].update({_first_layer(d)[1]: "oops"}), "must be a number"),
        (lambda d: d["layers"][_first_layer(d)[0]].update({_first_layer(d)[1]: True}), "must be a number"),
        (lambda d: d.update(layers=3), 'field "layers" must be an object, found a number (3)'),
        (lambda d: d["stages"].update(forward=[1]), 'field "stages.forward" must be an object, found a list'),
        (lambda d: d["units"].update(x=1), 'field "units.x" must be a string, found a number (1)'),
        (lambda d: d.update(rows=[]), 'field "rows" is not a metric-table section'),
    ],
)
def test_a_damaged_table_fails_at_read_with_one_line_naming_file_and_field(
    tmp_path: Path, change: object, message: str
) -> None:
    run_dir = _damaged(tmp_path, change)
    with pytest.raises(RunDirError) as caught:
        RunData.load(run_dir).metrics()
    text = str(caught.value)
    assert "\n" not in text
    assert text.startswith(str(run_dir / "passes" / "layers" / "perf_events.metrics.json") + ": ")
    assert message in text


def test_a_table_that_is_not_json_names_the_file(tmp_path: Path) -> None:
    run_dir = _damaged(tmp_path, lambda d: None)
    path = run_dir / "passes" / "layers" / "perf_events.metrics.json"
    path.write_text('{"layers": ')
    with pytest.raises(RunDirError, match=r"perf_events\.metrics\.json: not valid JSON"):
        RunData.load(run_dir).metrics()
