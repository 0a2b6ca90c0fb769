"""advise's race (issue 66): every candidate gets its first paired blocks; one whose output check failed, or whose
spread lies wholly below the best row's so far, stops there and its row says how far it ran and why."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hwprof.analysis.advice.race import FIRST_BLOCKS, out_of_race, race_bar
from hwprof.analysis.advice.speedup import PAIRED, PASS_LEVEL, Speedup
from hwprof.analysis.advice.table import Advice, AdviceRow
from hwprof.core.config import RunConfig
from hwprof.render.advice.export import advice_csv_rows
from hwprof.render.advice.table import advice_spec
from hwprof.schema.advise_result import AdviseSpec


def row(key: str, ratio: float, q1: float, q3: float, method: str = PAIRED) -> AdviceRow:
    r = AdviceRow(key, key, f"--{key}", "f")
    r.forward = Speedup(method, ratio, q1, q3, q1 - 0.1, q3 + 0.1, 8, 30.0, 30.0 / ratio)
    return r


def test_the_bar_is_the_best_ranked_rows_spread_low_end() -> None:
    assert race_bar([]) is None
    rows = [row("openvino", 2.51, 2.46, 2.55), row("bf16", 1.37, 1.34, 1.41), row("noise", 1.02, 0.97, 1.08)]
    bar = race_bar(rows)
    assert bar == {"key": "openvino", "low": 2.46, "spread": "2.46-2.55"}
    level = row("process", 3.0, 0.0, 0.0, PASS_LEVEL)
    level.forward = Speedup(PASS_LEVEL, 3.0, None, None, 2.9, 3.1, 0, 30.0, 10.0)
    assert race_bar([*rows, level]) == {"key": "process", "low": 2.9, "spread": "2.90-3.10"}


def test_a_candidate_leaves_when_clearly_below_the_best_or_broken_and_runs_on_otherwise() -> None:
    bar = {"key": "openvino", "low": 2.46, "spread": "2.46-2.55"}
    below = Speedup(PAIRED, 1.37, 1.34, 1.41, 1.3, 1.5, 4)
    assert out_of_race(below, False, bar) == "its spread 1.34-1.41 lies wholly below that of openvino (2.46-2.55)"
    touching = Speedup(PAIRED, 2.3, 2.1, 2.47, 2.0, 2.6, 4)  # its upper quartile reaches the best's lower one
    assert out_of_race(touching, False, bar) == ""
    broken = Speedup(PAIRED, 4.0, 3.9, 4.1, 3.8, 4.2, 4)
    assert out_of_race(broken, True, bar) == "its output check failed (never ranked)"
    assert out_of_race(below, False, None) == ""  # no row ranked yet: nothing to be below
    assert out_of_race(None, False, bar) == ""


def test_the_row_says_how_far_it_ran_in_the_table_the_csv_and_advice_json() -> None:
    r = row("bf16", 1.37, 1.34, 1.41)
    r.race = "after 4 of 8 blocks: its spread 1.34-1.41 lies wholly below that of openvino (2.46-2.55)"
    advice = Advice("--model m", "cpu", [r])
    assert f"bf16: left the race {r.race}" in advice_spec(advice).notes
    assert advice_csv_rows(advice)[0]["race"] == r.race
    assert Advice.from_dict(advice.to_dict()).rows[0].race == r.race
    assert "race" not in Advice("--model m", "cpu", [row("x", 2.0, 1.9, 2.1)]).to_dict()["rows"][0]


@pytest.mark.slow
def test_a_real_worker_stops_after_its_first_blocks_below_the_bar_and_runs_them_all_above_it(tmp_path: Path) -> None:
    """The real paired worker (yolov8n at 64, channels_last, one thread): against a bar no change reaches it
    stops after its first blocks and says why; against none it runs the plan's blocks."""
    from hwprof.advisor.children import paired_command
    from hwprof.rundir.advise_files import read_advise_result

    base = RunConfig(model="yolov8n", imgsz=64, threads=1)
    variant = RunConfig(model="yolov8n", imgsz=64, threads=1, channels_last=True)
    for name, bar in (("raced", {"key": "imaginary", "low": 1000.0, "spread": "1000-1001"}), ("all", None)):
        spec = AdviseSpec.of(
            key="channels_last", baseline=base.to_dict(), variant=variant.to_dict(), blocks=FIRST_BLOCKS + 2,
            first_blocks=FIRST_BLOCKS, race_bar=bar, warmup=1, work_dir=str(tmp_path / name),
            mode="paired", out=str(tmp_path / f"{name}.json"),
        )  # fmt: skip
        proc = subprocess.run(paired_command(spec, tmp_path / f"{name}.spec.json"), capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
        result = read_advise_result(tmp_path / f"{name}.json")
        blocks = len(result.sides["variant"].forward_ms) // 2
        if bar is None:
            assert blocks == FIRST_BLOCKS + 2 and result.stopped is None
        else:
            assert blocks == FIRST_BLOCKS, blocks
            assert result.stopped is not None and result.stopped.startswith(f"after {FIRST_BLOCKS} of 6 blocks: ")
            assert "lies wholly below that of imaginary (1000-1001)" in result.stopped
