"""The invariants of a run's figures (issue 56): hwprof.rundir.invariants.RULES, applied by RunData on every load.

Each rule is tested at its edge with hypothesis: figures computed the way hwprof computes them from real-looking
durations (hwprof.core.spans.latency_stats) always load, a figure moved just inside its limit loads, and one moved
just outside it is refused with the rule's words. Every case goes through the real reader on a copy of
tests/fixtures/rundir_small (a real yolov8n run: its timing pass's wall time is 3.956 s).
"""

from __future__ import annotations

import copy
import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_damaged_runs import FIXTURE, cli, damaged, edit_run, one_error

from hwprof.core.spans import frames_per_second, latency_stats
from hwprof.rundir.invariants import OLD_FPS_FACTOR, RULES, SLACK, median_weight
from hwprof.rundir.reader import RunData
from hwprof.schema.check import RunDirError
from hwprof.schema.kernels_file import KernelsFile

pytestmark = pytest.mark.fault

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TIMING = ("collectors", "timing", "summary")
BASE: dict[str, Any] = json.loads((FIXTURE / "run.json").read_text())


def out(limit: float) -> float:
    """A step just beyond the rules' rounding allowance at `limit` (10 times SLACK)."""
    return 10 * SLACK * max(abs(limit), 1.0)


def within(limit: float) -> float:
    """A step within the rules' rounding allowance at `limit` (a tenth of SLACK)."""
    return SLACK * max(abs(limit), 1.0) / 10


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One copy of the fixture for a module's examples: each example writes its own run.json there."""
    root = tmp_path_factory.mktemp("invariants") / "run"
    shutil.copytree(FIXTURE, root)
    return root


def load(root: Path, run: dict[str, Any]) -> RunData:
    (root / "run.json").write_text(json.dumps(run))
    return RunData.load(root)


def refused(root: Path, run: dict[str, Any], rule: str, field: str) -> str:
    """The one-line error of loading `run`, checked to name run.json, `field` and `rule`."""
    with pytest.raises(RunDirError) as caught:
        load(root, run)
    message = str(caught.value)
    assert message.startswith(f'{root}/run.json: field "{field}" must be '), message
    assert message.endswith(f"(rule {rule})"), message
    words = next(r for r in RULES if r.name == rule)
    assert words.reads and words.words
    return message


def at_edge(root: Path, run: dict[str, Any], inside: bool, rule: str, field: str) -> str:
    """Just inside a rule's limit `run` loads (""); just outside, the refusal's message (see refused)."""
    if inside:
        load(root, run)
        return ""
    return refused(root, run, rule, field)


def stats(values: list[float]) -> dict[str, Any]:
    """A stage's figures as hwprof writes them into run.json."""
    return latency_stats(values).to_dict()


def with_stages(stages: dict[str, list[float]], iteration: list[float]) -> dict[str, Any]:
    """The fixture's run.json with these durations (ms) as the stages of both tables (run.json's and the timing
    collector's), and the FPS of their iteration."""
    run = copy.deepcopy(BASE)
    table = {name: stats(values) for name, values in stages.items()}
    table["iteration"] = stats(iteration)
    p50 = table["iteration"]["p50_ms"]
    fps = frames_per_second(1, p50) if p50 else None  # a real iteration takes time: 0 only in a drawn one
    run["stages"], run["fps"] = table, fps
    summary = run["collectors"]["timing"]["summary"]
    summary["stages"], summary["fps"] = copy.deepcopy(table), fps
    return run


@st.composite
def iterations(draw: st.DrawFn, least: int = 1, most: int = 12) -> tuple[dict[str, list[float]], list[float]]:
    """Durations (ms, of whole ns) of 1-3 stages over n iterations, and each iteration's: its stages' sum plus time
    no stage claims (a real iteration is at least its stages, which run one after another inside it)."""
    n = draw(st.integers(least, most))
    names = draw(st.lists(st.sampled_from(["load", "preprocess", "forward", "postprocess"]), min_size=1,
                          max_size=3, unique=True))  # fmt: skip
    ns = st.integers(0, 40_000_000)  # the markers' clock: whole nanoseconds
    stages = {name: draw(st.lists(ns, min_size=n, max_size=n)) for name in names}
    extra = draw(st.lists(st.integers(0, 20_000_000), min_size=n, max_size=n))
    whole = [sum(stage[i] for stage in stages.values()) + extra[i] for i in range(n)]
    return {name: [t / 1e6 for t in stage] for name, stage in stages.items()}, [t / 1e6 for t in whole]


def set_figure(run: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    doc = run
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value
    return run


# -- a real run never breaks a rule -----------------------------------------------------------------------------


@SETTINGS
@given(iterations())
def test_figures_of_real_durations_always_load(run_dir: Path, drawn: Any) -> None:
    """The bounds are rigorous: whatever the stages' durations, the figures hwprof computes from them load."""
    load(run_dir, with_stages(*drawn))


@SETTINGS
@given(st.integers(1, 25), st.floats(0.5, 100.0))
def test_the_medians_bound_is_reached_by_a_real_run(run_dir: Path, n: int, m: float) -> None:
    """Two stages, each at m in n // 2 + 1 iterations and 0 in the others, overlapping in as few as they can: the
    stages' (n // 2 + 1) x p50 add up to the iterations' total exactly (odd n), and the run loads."""
    k = median_weight(n)
    a = [m] * k + [0.0] * (n - k)
    b = [0.0] * (n - k) + [m] * k
    assert sorted(a)[n // 2] == m
    whole = [x + y for x, y in zip(a, b, strict=True)]
    run = with_stages({"preprocess": a, "forward": b}, whole)
    if n % 2:
        total = sum(whole)
        assert math.isclose(k * (run["stages"]["preprocess"]["p50_ms"] + run["stages"]["forward"]["p50_ms"]), total)
    load(run_dir, run)


# -- each rule at its edge ----------------------------------------------------------------------------------------


@SETTINGS
@given(iterations(), st.sampled_from(["stages", "collectors.timing.summary.stages"]))
def test_percentiles_in_order(run_dir: Path, drawn: Any, table: str) -> None:
    run = with_stages(*drawn)
    stage = next(iter(drawn[0]))
    figures = run["stages"][stage] if table == "stages" else run["collectors"]["timing"]["summary"]["stages"][stage]
    p99, mean = figures["p99_ms"], figures["mean_ms"]
    figures["max_ms"] = max(p99, mean)  # just inside: the max at its p99 (or the mean, when it is above the p99)
    load(run_dir, run)
    figures["max_ms"] = p99 - out(p99)
    assume(figures["max_ms"] >= 0)
    refused(run_dir, run, "percentiles-ordered", f"{table}.{stage}.p99_ms")


@pytest.mark.parametrize("table", ["stages", "collectors.timing.summary.stages"])
def test_counts_agree(run_dir: Path, table: str) -> None:
    """Issue 67: a forward of n=0 beside a p50 of 258 ms, and a stage counted more often than its iterations,
    loaded. As many forwards as iterations load; one more, or none, is refused."""
    run = with_stages({"forward": [5.0] * 8}, [6.0] * 8)
    load(run_dir, run)
    figures = run["stages"] if table == "stages" else run["collectors"]["timing"]["summary"]["stages"]
    figures["forward"]["n"] = 9
    assert "at most" in refused(run_dir, run, "counts-agree", f"{table}.forward.n")
    figures["forward"]["n"] = 0
    assert "which no count of 0 has" in refused(run_dir, run, "counts-agree", f"{table}.forward.n")


@SETTINGS
@given(iterations(least=1, most=2), st.booleans())
def test_one_or_two_iterations(run_dir: Path, drawn: Any, inside: bool) -> None:
    """With one iteration every figure is its one duration; with two, the median is their mean."""
    stages, _ = drawn
    run = with_stages(*drawn)
    stage = next(iter(stages))
    figures = run["stages"][stage]
    mean = figures["mean_ms"]
    n = figures["n"]
    key = "min_ms" if n == 1 else "p50_ms"
    assume(mean >= out(mean))
    if inside:
        figures[key] = mean - within(mean)
        figures["min_ms"] = min(figures["min_ms"], figures[key])
        load(run_dir, run)
        return
    figures[key] = mean - out(mean)
    figures["min_ms"] = min(figures["min_ms"], figures[key])
    message = refused(run_dir, run, "few-iterations", f"stages.{stage}.{key}")
    assert f"equal to stages.{stage}.mean_ms" in message


@SETTINGS
@given(iterations(), st.booleans())
def test_a_stage_is_inside_its_iteration(run_dir: Path, drawn: Any, inside: bool) -> None:
    """A stage as long as its iteration in every iteration loads; one a step longer in its longest does not."""
    _, whole = drawn
    longest = max(range(len(whole)), key=whole.__getitem__)
    forward = list(whole)
    if not inside:
        forward[longest] += out(whole[longest])
    run = with_stages({"forward": forward}, whole)
    message = at_edge(run_dir, run, inside, "stage-inside-iteration", "" if inside else message_field(run_dir, run))
    assert inside or "a stage is a part of its iteration" in message


def message_field(root: Path, run: dict[str, Any]) -> str:
    """The field a refused run.json's message names (for rules whose first broken figure depends on the data)."""
    with pytest.raises(RunDirError) as caught:
        load(root, run)
    return str(caught.value).split('field "', 1)[1].split('"', 1)[0]


@SETTINGS
@given(iterations(), st.booleans())
def test_a_stage_of_another_count_is_inside_the_longest_iteration(run_dir: Path, drawn: Any, inside: bool) -> None:
    """A stage run a different number of times than the iterations (a program's call made twice in some, not at
    all in others): each call is inside one iteration, so none is longer than the longest iteration."""
    _, whole = drawn
    run = with_stages({}, whole)
    top = run["stages"]["iteration"]["max_ms"]
    calls = [top if inside else top + out(top)] + [0.0] * (len(whole) + 1)  # two calls more than iterations
    run["stages"]["decode"] = stats(calls)
    message = at_edge(run_dir, run, inside, "stage-inside-iteration", "stages.decode.max_ms")
    assert inside or "a stage is inside an iteration" in message


@SETTINGS
@given(st.integers(3, 40), st.floats(1.0, 100.0), st.integers(2, 4), st.booleans())
def test_the_medians_add_up_within_the_iterations(run_dir: Path, n: int, c: float, k: int, inside: bool) -> None:
    """The issue's case: k stages whose p50s each stay below the iteration's and whose means are consistent,
    but whose (n // 2 + 1) x p50 add up to more than the n iterations' total."""
    run = with_stages({}, [c] * n)
    assume(n * c / 1e3 < 0.99 * run["passes"]["timing"]["wall_s"])  # the iterations fit the pass (another rule)
    total = n * run["stages"]["iteration"]["mean_ms"]
    weighted = total / (k * median_weight(n))  # each stage's p50 at the edge: k of them add up to the total
    p50 = weighted - within(weighted) if inside else weighted + out(weighted)
    for i in range(k):
        run["stages"][f"stage{i}"] = {"n": n, "mean_ms": 0.999 * c / k, "stdev_ms": 0.0, "p50_ms": p50,
                                      "p90_ms": p50, "p99_ms": p50, "min_ms": 0.0, "max_ms": p50}  # fmt: skip
    message = at_edge(
        run_dir, run, inside, "stages-add-up", "stages (the stages' medians, sum of (n // 2 + 1) x p50_ms)"
    )
    assert inside or "at least n // 2 + 1 of a stage's n durations add up to its p50 or more" in message


@SETTINGS
@given(iterations(), st.booleans())
def test_the_stages_total_within_the_iterations(run_dir: Path, drawn: Any, inside: bool) -> None:
    """Two halves of every iteration load; halves a step longer (each still shorter than its iteration) do not."""
    _, whole = drawn
    assume(max(whole) > 1e-3)
    step = 0.0 if inside else out(sum(whole))
    half = [t / 2 + step for t in whole]
    run = with_stages({"preprocess": half, "forward": half}, whole)
    assume(all(h <= t for h, t in zip(half, whole, strict=True)))
    at_edge(run_dir, run, inside, "stages-add-up", "stages (the stages' total, sum of n x mean_ms)")


@SETTINGS
@given(iterations(), st.sampled_from([("fps",), (*TIMING, "fps")]), st.floats(-1.0, 1.0))
def test_every_fps_is_the_batch_over_the_iteration_p50(
    run_dir: Path, drawn: Any, path: tuple[str, ...], step: float
) -> None:
    run = with_stages(*drawn)
    assume(run["stages"]["iteration"]["p50_ms"] > 0)
    fps = run["fps"]
    set_figure(run, path, fps + step * within(fps))
    load(run_dir, run)
    assume(abs(step) > 0.01)
    set_figure(run, path, fps + math.copysign(out(fps), step) * (1 + abs(step)))
    message = refused(run_dir, run, "fps-is-batch-over-p50", ".".join(path))
    assert "must be batch x 1000 / " in message


@SETTINGS
@given(iterations())
def test_an_fps_written_before_the_fix_is_read_right_with_a_note(run_dir: Path, drawn: Any) -> None:
    """Collects before issue 56 wrote the timing summary's FPS 1000 times too large: read as the right value, with a
    warning; any other factor is refused."""
    run = with_stages(*drawn)
    assume(run["stages"]["iteration"]["p50_ms"] > 0)
    fps = run["fps"]
    set_figure(run, (*TIMING, "fps"), fps * OLD_FPS_FACTOR)
    data = load(run_dir, run)
    summary = data.doc.collectors["timing"].summary
    assert summary is not None and math.isclose(summary.fps, fps)  # type: ignore[attr-defined]
    assert any("1000 times the real FPS" in w for w in data.warnings), data.warnings
    set_figure(run, (*TIMING, "fps"), fps * OLD_FPS_FACTOR * (1 + 1e-6))
    refused(run_dir, run, "fps-is-batch-over-p50", "collectors.timing.summary.fps")


@SETTINGS
@given(st.floats(1e-3, 4.0), st.booleans())
def test_a_stage_within_its_pass_wall_time(run_dir: Path, fraction: float, inside: bool) -> None:
    wall = BASE["passes"]["timing"]["wall_s"] * 1e3
    ms = wall * min(fraction, 1.0) if inside else wall + out(wall) * (1 + fraction)
    run = with_stages({"forward": [ms]}, [ms])
    message = at_edge(run_dir, run, inside, "within-wall-time", "stages.forward.min_ms")
    assert inside or "must be at most the timing pass's wall time (3.956 s, passes.timing.wall_s)" in message


@SETTINGS
@given(st.integers(0, 10_000))
def test_samples_within_their_rate(run_dir: Path, samples: int) -> None:
    run = copy.deepcopy(BASE)
    sysstat = run["collectors"]["sysstat"]
    wall_ms = run["passes"][sysstat["pass"]]["wall_s"] * 1e3
    most = 1.5 * wall_ms / sysstat["summary"]["interval_ms"] + 2
    sysstat["summary"]["samples"] = samples
    if samples <= most:
        load(run_dir, run)
    else:
        refused(run_dir, run, "samples-within-rate", "collectors.sysstat.summary.samples")


# -- shares and counts: the schema's per-field bounds, wherever they are stored ---------------------------------

SHARE = "must be a share within 0-1"
NOT_NEGATIVE = "must be a number >= 0 (a duration, size or count)"
OUTSIDE_SHARE = st.one_of(st.floats(1 + 1e-8, 1e6), st.floats(-1e6, -1e-300))


def neighbours(share: float) -> dict[str, Any]:
    return {"wall_s": 3.9, "cpus": [0, 1], "other_cpu_s": 0.1, "share": share, "steal_s": 0.0, "own_cpu_s": 3.0,
            "top": [], "scans": 3, "method": "/proc/stat"}  # fmt: skip


@SETTINGS
@given(st.one_of(st.floats(0.0, 1.0), st.just(1.0 + 1e-10)))
def test_a_neighbours_share_within_0_1_loads(run_dir: Path, share: float) -> None:
    run = copy.deepcopy(BASE)
    run["passes"]["timing"]["neighbours"] = neighbours(share)
    data = load(run_dir, run)
    assert data.doc.passes["timing"].neighbours is not None


@SETTINGS
@given(OUTSIDE_SHARE)
def test_a_neighbours_share_outside_0_1_is_refused(run_dir: Path, share: float) -> None:
    run = copy.deepcopy(BASE)
    run["passes"]["timing"]["neighbours"] = neighbours(share)
    with pytest.raises(RunDirError, match=r'field "passes\.timing\.neighbours\.share" ' + SHARE):
        load(run_dir, run)


KERNELS = Path(__file__).parent / "fixtures" / "rundir_report" / "passes" / "kernels" / "perf_sampling.kernels.json"


def kernels_with_cause(share: float, samples: int = 3) -> dict[str, Any]:
    doc = json.loads(KERNELS.read_text())
    doc["forward"]["kernel_causes"] = [{"cause": "page faults", "share": share, "samples": samples, "parts": []}]
    return doc


@SETTINGS
@given(st.floats(0.0, 1.0), st.integers(0, 10**6))
def test_a_kernel_cause_within_its_bounds_loads(share: float, samples: int) -> None:
    doc = KernelsFile.from_json(kernels_with_cause(share, samples), "perf_sampling.kernels.json")
    assert doc.forward.kernel_causes[0].share == share


@SETTINGS
@given(OUTSIDE_SHARE)
def test_a_kernel_cause_share_outside_0_1_is_refused(share: float) -> None:
    with pytest.raises(RunDirError, match=r'field "forward\.kernel_causes\.0\.share" ' + SHARE):
        KernelsFile.from_json(kernels_with_cause(share), "perf_sampling.kernels.json")


@SETTINGS
@given(st.integers(-(10**6), -1))
def test_counts_are_not_negative(run_dir: Path, n: int) -> None:
    run = copy.deepcopy(BASE)
    run["stages"]["forward"]["n"] = n
    with pytest.raises(RunDirError, match=r'field "stages\.forward\.n" ' + re_escape(NOT_NEGATIVE)):
        load(run_dir, run)
    with pytest.raises(RunDirError, match=r'field "forward\.kernel_causes\.0\.samples" ' + re_escape(NOT_NEGATIVE)):
        KernelsFile.from_json(kernels_with_cause(0.5, n), "perf_sampling.kernels.json")


def re_escape(text: str) -> str:
    import re

    return re.escape(text)


# -- the issue's damaged values, through the command line --------------------------------------------------------


def _medians_195(run: dict[str, Any], n: int | None = None) -> None:
    """The issue's first case: two stages whose p50s each stay below the iteration's (97.5% of it) but add up to
    195% of it, their means consistent (49% of the iteration's each; the other stages 0); on the fixture's two
    iterations, or as if there had been n."""
    stages = run["stages"]
    it = stages["iteration"]
    for name, figures in stages.items():
        figures["n"] = n or figures["n"]
        if name == "iteration":
            continue
        big = name in ("preprocess", "forward")
        p50, mean = (0.975 * it["p50_ms"], 0.49 * it["mean_ms"]) if big else (0.0, 0.0)
        figures.update(p50_ms=p50, p90_ms=p50, p99_ms=p50, max_ms=p50, min_ms=0.0, mean_ms=mean, stdev_ms=0.0)


def _p50_not_mean(run: dict[str, Any]) -> None:
    forward = run["stages"]["forward"]
    forward["p50_ms"] = forward["min_ms"] = forward["mean_ms"] * 0.9


DAMAGES: dict[str, tuple[Callable[[Path], None], str]] = {
    "medians-195": (edit_run(_medians_195), "(rule few-iterations)"),
    "medians-195-n20": (edit_run(lambda run: _medians_195(run, 20)), "(rule stages-add-up)"),
    "p50-not-mean": (edit_run(_p50_not_mean), 'field "stages.forward.p50_ms" must be equal to stages.forward.mean_ms'),
    "fps-off": (edit_run(lambda run: set_figure(run, ("fps",), run["fps"] * 1.01)), 'field "fps" must be batch x 1000'),
    "neighbours-share": (
        edit_run(lambda run: set_figure(run, ("passes", "timing", "neighbours"), neighbours(1.0000001))),
        'field "passes.timing.neighbours.share" must be a share within 0-1, found a number (1.0000001)',
    ),
}


@pytest.mark.parametrize("case", sorted(DAMAGES))
@pytest.mark.parametrize("command", ["report", "compare"])
def test_the_issue_damages_are_refused_by_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, command: str
) -> None:
    edit, expected = DAMAGES[case]
    run = damaged(tmp_path, edit)
    argv = [command, str(run)] if command != "compare" else [command, str(FIXTURE), str(run)]
    code, text = cli(capsys, *argv)
    assert code == 2, text
    assert f"{run}/run.json: field " in one_error(text) and expected in text, text


def test_a_kernel_cause_share_just_above_one_is_refused_by_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's kernel_causes[].share of 1.0000001: typed as a Share, refused where summary.json copied it."""
    run = tmp_path / "run"
    shutil.copytree(KERNELS.parents[2], run)
    path = run / "passes" / "kernels" / "perf_sampling.kernels.json"
    path.write_text(json.dumps(kernels_with_cause(1.0000001)))
    code, text = cli(capsys, "report", str(run))
    assert code == 2, text
    expected = 'field "forward.kernel_causes.0.share" must be a share within 0-1, found a number (1.0000001)'
    assert f"perf_sampling.kernels.json: {expected}" in one_error(text), text  # the file as layer_sources names it
