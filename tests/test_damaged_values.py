"""Values that cannot be (issue 38): a number of the right type that no run could hold (NaN, Infinity, 1e400,
10**30, a negative duration, a share above 1, a p50 longer than its pass), and markers whose ends come before
their begins, give one line naming the file, the field (or line) and the value, and exit 2: never a table of
"inf" or a slice of seconds built from nothing.

Every case damages a copy of tests/fixtures/rundir_small (a real yolov8n run), as test_damaged_runs.py does.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_damaged_runs import FIXTURE, cli, damaged, edit_run, one_error

from hwprof.schema.check import RunDirError
from hwprof.schema.records import MetricTables

pytestmark = pytest.mark.fault

FORWARD_P50 = '"p50_ms": 35.2742315'
"""The forward stage's p50 in the fixture's run.json (stages.forward and timing's summary), as written."""


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")


def forward_p50(text: str) -> Any:
    """Edit run.json as text: json reads NaN, Infinity and 1e400 only from the file's own words."""

    def edit(run_dir: Path) -> None:
        path = run_dir / "run.json"
        path.write_text(path.read_text().replace(FORWARD_P50, f'"p50_ms": {text}'))

    return edit


FINITE = "must be a finite number"
BOUND_64 = "must be a number below 2**64"
NOT_NEGATIVE = "must be a number >= 0 (a duration, size or count)"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("NaN", f"{FINITE}, found a number (NaN)"),
        ("Infinity", f"{FINITE}, found a number (Infinity)"),
        ("1e400", f"{FINITE}, found a number (Infinity)"),
        (str(10**30), f"{BOUND_64} (no count, size or time of a run is larger), found a number ({10**30})"),
        ("-5.0", f"{NOT_NEGATIVE}, found a number (-5.0)"),
        (
            "5000.0",
            "must be at most the timing pass's wall time (3.956 s, passes.timing.wall_s), found a number (5000.0)",
        ),
    ],
    ids=["nan", "infinity", "1e400", "10**30", "negative", "longer-than-its-pass"],
)
@pytest.mark.parametrize("command", ["report", "trace", "compare"])
def test_forward_p50_that_cannot_be(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: str, command: str
) -> None:
    run_dir = damaged(tmp_path, forward_p50(text))
    argv = [command, str(run_dir)] if command != "compare" else [command, str(FIXTURE), str(run_dir)]
    code, out = cli(capsys, *argv)
    assert code == 2, out
    assert f'{run_dir}/run.json: field "stages.forward.p50_ms" {expected}' in one_error(out)


def _set(path: list[Any], value: Any) -> Any:
    def change(run: dict[str, Any]) -> None:
        doc = run
        for key in path[:-1]:
            doc = doc[key]
        doc[path[-1]] = value

    return edit_run(change)


WALL = "must be at most the timing pass's wall time (3.956 s, passes.timing.wall_s)"


@pytest.mark.parametrize(
    ("path", "value", "field", "expected"),
    [
        (["passes", "layers", "host_steal_share"], 1.5, "", "must be a share within 0-1, found a number (1.5)"),
        (["passes", "timing", "wall_s"], -1.0, "", f"{NOT_NEGATIVE}, found a number (-1.0)"),
        (["stages", "forward", "n"], -2, "", f"{NOT_NEGATIVE}, found a number (-2)"),
        (["config", "iters"], 10**30, "", BOUND_64),
        (["collectors", "sysstat", "summary", "samples"], -4, "", f"{NOT_NEGATIVE}, found a number (-4)"),
        (["stages", "forward", "max_ms"], 3000.0, "", "must be at most n x mean_ms (2 x 35.2742: the"),
        (["stages", "forward", "n"], 1000, "stages.forward.mean_ms", f"{WALL} / n (1000 iterations)"),
        (["passes", "trace", "forward_p50_ms"], 20000.0, "", "must be at most the trace pass's wall time (10.589 s"),
        (["collectors", "sysstat", "summary", "samples"], 4000, "", "must be at most the layers pass's wall time"),
        (
            ["collectors", "torch_profiler", "summary", "top_kernels", 0, "share"], 1.7,
            "collectors.torch_profiler.summary.top_kernels.0.share", "must be a share within 0-1, found a number (1.7)",
        ),
    ],
    ids=[
        "share", "wall", "count", "count-64-bit", "summary-count", "max-beyond-total", "n-beyond-wall", "pass-p50",
        "samples-beyond-rate", "top-op-share",
    ],
)  # fmt: skip
def test_a_field_that_cannot_be_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: list[Any], value: Any, field: str, expected: str
) -> None:
    run_dir = damaged(tmp_path, _set(path, value))
    code, out = cli(capsys, "report", str(run_dir))
    assert code == 2, out
    assert f'{run_dir}/run.json: field "{field or ".".join(path)}" {expected}' in one_error(out)


def test_small_negative_differences_stay_allowed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Fields that are differences of clocks or counts (a return code naming a signal, a clock residual, a change
    of RSS) hold negative values in real runs: they are read as they are."""

    def edit(run_dir: Path) -> None:
        _set(["passes", "scalene", "returncode"], -15)(run_dir)
        for name, metric, value in (("sysstat", "rss_growth_bytes", -4096.0), ("perf_events", "gap.task-clock", -1.0)):
            path = run_dir / "passes" / "layers" / f"{name}.metrics.json"
            tables = json.loads(path.read_text())
            tables["stages"]["forward"][metric] = value
            path.write_text(json.dumps(tables))

    run_dir = damaged(tmp_path, edit)
    code, out = cli(capsys, "report", str(run_dir))
    assert code == 0 and "hwprof: error" not in out, out


@pytest.mark.parametrize(
    ("metric", "value", "expected"),
    [
        ("cores_busy", float("nan"), f"{FINITE}, found a number (NaN)"),
        ("cpu_s", -0.5, f"{NOT_NEGATIVE}, found a number (-0.5)"),
        ("rss_peak_bytes", float("inf"), f"{FINITE}, found a number (Infinity)"),
    ],
)
def test_metric_table_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], metric: str, value: float, expected: str
) -> None:
    def edit(run_dir: Path) -> None:
        path = run_dir / "passes" / "layers" / "sysstat.metrics.json"
        tables = json.loads(path.read_text())
        tables["stages"]["forward"][metric] = value
        path.write_text(json.dumps(tables))

    run_dir = damaged(tmp_path, edit)
    code, out = cli(capsys, "report", str(run_dir))
    assert code == 2, out
    where = f'{run_dir}/passes/layers/sysstat.metrics.json: field "stages.forward.{metric}" {expected}'
    assert where in one_error(out)


def test_metric_share_above_one(tmp_path: Path) -> None:
    path = tmp_path / "pyspy.metrics.json"
    path.write_text(json.dumps({"layers": {"model.0": {"pyspy_native_share": 1.2}}}))
    with pytest.raises(RunDirError, match=r'"layers\.model\.0\.pyspy_native_share" must be a share within 0-1'):
        MetricTables.load(path)


def _edit_record(file: str, kind: str, key: str, value: Any) -> Any:
    """Damage the first record of `kind` in a records.jsonl; the edited line's number is kept in `lines`."""
    lines: list[int] = []

    def edit(run_dir: Path) -> None:
        path = run_dir / "passes" / file
        rows = path.read_text().splitlines(keepends=True)
        index = next(i for i, line in enumerate(rows) if f'"kind":"{kind}"' in line.replace(" ", ""))
        row = json.loads(rows[index])
        row[key] = value
        rows[index] = json.dumps(row) + "\n"
        path.write_text("".join(rows))
        lines.append(index + 1)

    edit.lines = lines  # type: ignore[attr-defined]
    return edit


@pytest.mark.parametrize(
    ("file", "kind", "key", "value", "expected"),
    [
        (
            "trace/torch_profiler.records.jsonl",
            "span",
            "dur_ns",
            -5000,
            f'"dur_ns" {NOT_NEGATIVE}, found a number (-5000)',
        ),
        ("layers/sysstat.records.jsonl", "counter", "value", float("nan"), f'"value" {FINITE}, found a number (NaN)'),
        (
            "layers/perf_events.records.jsonl",
            "counter",
            "value",
            float("inf"),
            f'"value" {FINITE}, found a number (Infinity)',
        ),
        ("trace/pyspy.records.jsonl", "span", "ts_ns", 10**30, f'"ts_ns" {BOUND_64}'),
    ],
    ids=["span-negative", "counter-nan", "counter-inf", "span-ts-64-bit"],
)
def test_records_that_cannot_be_fail_the_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], file: str, kind: str, key: str, value: Any, expected: str
) -> None:
    edit = _edit_record(file, kind, key, value)
    run_dir = damaged(tmp_path, edit)
    code, out = cli(capsys, "trace", str(run_dir))
    assert code == 2, out
    assert f"{run_dir}/passes/{file}:{edit.lines[0]}: field {expected}" in one_error(out)
    assert not (run_dir / "trace.pftrace").exists()


def _markers_edit(change: Any) -> Any:
    """Edit the layers pass's markers.jsonl: `change(rows)` moves its lines and returns the expected message's
    tail, kept in `expected`."""
    expected: list[str] = []

    def edit(run_dir: Path) -> None:
        path = run_dir / "passes" / "layers" / "markers.jsonl"
        lines = path.read_text().splitlines(keepends=True)
        expected.append(change(lines, [json.loads(line) for line in lines]))
        path.write_text("".join(lines))

    edit.expected = expected  # type: ignore[attr-defined]
    return edit


def _first(rows: list[list[Any]], phase: str, name: str) -> int:
    """The index of the first measured (not warm-up) marker of this phase and name."""
    return next(i for i, r in enumerate(rows) if r[1] == phase and r[2] == name and not r[5])


def end_before_begin(lines: list[str], rows: list[list[Any]]) -> str:
    end = _first(rows, "E", "model.0")
    begin = end - 1
    lines.insert(begin, lines.pop(end))
    return f"{begin + 1}: E model.0 (iteration 0) comes before its B (line {begin + 2})"


def end_without_begin(lines: list[str], rows: list[list[Any]]) -> str:
    begin = _first(rows, "B", "model.5")
    del lines[begin]
    return f"{begin + 1}: E model.5 (iteration 0) has no B"


def layer_outside_forward(lines: list[str], rows: list[list[Any]]) -> str:
    forward_end = _first(rows, "E", "forward")
    last_layer_end = forward_end - 1
    lines[forward_end], lines[last_layer_end] = lines[last_layer_end], lines[forward_end]
    name = rows[last_layer_end][2]
    return (
        f"{last_layer_end + 1}: E forward (iteration 0) ends while {name} (B at line {last_layer_end}) is open: "
        f"{name} would end outside its forward"
    )


def begin_never_closed(lines: list[str], rows: list[list[Any]]) -> str:
    begin = _first(rows, "B", "model.3")
    del lines[_first(rows, "E", "model.3")]
    forward_end = _first(rows, "E", "forward")  # its line number once the line before it is gone
    return f"{forward_end}: E forward (iteration 0) ends while model.3 (B at line {begin + 1}) is open"


def time_goes_back(lines: list[str], rows: list[list[Any]]) -> str:
    end = _first(rows, "E", "model.2")
    row = rows[end]
    row[3] = rows[end - 1][3] - 1_000_000
    lines[end] = json.dumps(row) + "\n"
    return f"{end + 1}: E model.2 (iteration 0) is earlier than line {end} (B model.2 (iteration 0)): out of time order"


@pytest.mark.parametrize(
    "change",
    [end_before_begin, end_without_begin, layer_outside_forward, begin_never_closed, time_goes_back],
    ids=["end-before-begin", "end-without-begin", "layer-outside-forward", "begin-never-closed", "time-goes-back"],
)
@pytest.mark.parametrize("command", ["report", "trace"])
def test_markers_out_of_order_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Any, command: str
) -> None:
    edit = _markers_edit(change)
    run_dir = damaged(tmp_path, edit)
    code, out = cli(capsys, command, str(run_dir))
    assert code == 2, out
    assert f"{run_dir}/passes/layers/markers.jsonl:{edit.expected[0]}" in one_error(out)


def test_a_stopped_pass_may_leave_begins_open(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A pass halted mid-forward leaves its open begins at the end of the file: not damage (the trace marks them)."""

    def edit(run_dir: Path) -> None:
        path = run_dir / "passes" / "layers" / "markers.jsonl"
        lines = path.read_text().splitlines(keepends=True)
        rows = [json.loads(line) for line in lines]
        path.write_text("".join(lines[: _first(rows, "E", "model.4")]))

    run_dir = damaged(tmp_path, edit)
    code, out = cli(capsys, "report", str(run_dir))
    assert code == 0 and "hwprof: error" not in out, out


@pytest.mark.parametrize("command", ["report", "trace", "compare"])
def test_a_stage_longer_than_its_iteration(tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    """Every forward figure set to 1.7 times the iteration's (each still within the pass's wall time): stages are
    parts of an iteration, so this is refused by every command with the figure that bounds it."""

    def longer(run: dict[str, Any]) -> None:
        forward, iteration = run["stages"]["forward"], run["stages"]["iteration"]
        scale = 1.7 * iteration["p50_ms"] / forward["p50_ms"]
        for key in ("mean_ms", "stdev_ms", "p50_ms", "p90_ms", "p99_ms", "min_ms", "max_ms"):
            forward[key] *= scale

    run_dir = damaged(tmp_path, edit_run(longer))
    argv = [command, str(run_dir)] if command != "compare" else [command, str(FIXTURE), str(run_dir)]
    code, out = cli(capsys, *argv)
    assert code == 2, out
    line = one_error(out)
    assert line.startswith(f'hwprof: error: {run_dir}/run.json: field "stages'), line
    assert "stages.iteration" in line and ("a stage is a part of its iteration" in line or "total" in line), line


@pytest.mark.parametrize("command", ["report", "trace", "compare"])
def test_a_kernel_share_above_one_is_refused_by_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """One reader, one set of checks: `trace` refuses what `report` refuses (it built a trace from this)."""

    def edit(run_dir: Path) -> None:
        path = run_dir / "passes" / "kernels" / "perf_sampling.kernels.json"
        doc = json.loads(path.read_text())
        doc["layers"]["model.22"]["kernels"][0]["share"] = 1.7
        path.write_text(json.dumps(doc))

    run_dir = tmp_path / "run"
    shutil.copytree(Path(__file__).parent / "fixtures" / "rundir_report", run_dir)  # it has the kernels pass
    edit(run_dir)
    argv = [command, str(run_dir)] if command != "compare" else [command, str(FIXTURE), str(run_dir)]
    code, out = cli(capsys, *argv)
    assert code == 2, out
    assert 'field "layers.model.22.kernels.0.share" must be a share within 0-1, found a number (1.7)' in one_error(out)
