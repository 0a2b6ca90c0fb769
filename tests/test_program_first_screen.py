"""What the first screen says of a user's program's run (issue 58): the command the user gave and the input shapes
of its forwards in its first lines, at 80 columns, one shape too; the GFLOPs headline at the measured forwards'
shapes (their mean where they had several, each shape's figure beside it, and never a warm-up shape's figure
without saying so); and a pass that made some of its measured calls says how many. Rendered from the recorded
program run (tests/fixtures/program_run) with its inputs and FLOPs rewritten; the real collects are in
test_program_ends.py."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from rich.cells import cell_len
from rich.console import Console

from hwprof.advisor.program_budget import calls_seen
from hwprof.analysis.program.command import program_command
from hwprof.analysis.run_analysis import analyse
from hwprof.render.measured_flops import MeasuredFlops, ShapeFlops
from hwprof.render.report import render_markdown
from hwprof.rundir.reader import RunData
from hwprof.schema.program import ProgramDoc, ProgramOutcome
from hwprof.session.finish import report_run
from hwprof.session.program_record import _ended

FIXTURE = Path(__file__).parent / "fixtures" / "program_run"
A, B, W = "1x3x64x64", "1x3x64x96", "1x3x32x32"
COMMAND = "python tests/programs/detect_like.py --model yolov8n --img-size 64 --frames 40"


def _run(
    tmp_path: Path,
    shapes: dict[str, dict[str, int]],
    at: str = A,
    flops_by_shape: dict[str, int] | None = None,
    argv: list[str] | None = None,
) -> Path:
    """The recorded program run, its timing pass's forwards at `shapes` and its FLOPs counted at `at` (and at
    `flops_by_shape`'s shapes)."""
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE, run_dir, ignore=shutil.ignore_patterns("README.md"))
    path = run_dir / "run.json"
    doc: dict[str, Any] = json.loads(path.read_text())
    doc["passes"]["timing"]["inputs"] = {"shapes": shapes}
    flops = (flops_by_shape or {}).get(at, 131_159_808)
    doc["model"].update(input_shape=[int(n) for n in at.split("x")], flops=flops, gflops=flops / 1e9)
    summary = {"total_flops": flops, "gflops": flops / 1e9, "input_shape": doc["model"]["input_shape"]}
    if flops_by_shape:
        summary["flops_by_shape"] = flops_by_shape
    doc["collectors"]["flops"].update(status="ok", summary=summary)
    if argv is not None:
        doc["config"]["program"]["argv"] = argv
    path.write_text(json.dumps(doc))
    return run_dir


def _screen(run_dir: Path, width: int = 80) -> list[str]:
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False, legacy_windows=False)
    report_run(run_dir, console=console, write=False)
    return buf.getvalue().splitlines()


def _joined(lines: list[str]) -> str:
    return " ".join(" ".join(line.split()) for line in lines)


def test_the_first_lines_name_the_program_and_its_one_input_shape_at_80_columns(tmp_path: Path) -> None:
    lines = _screen(_run(tmp_path, {A: {"warmup": 2, "measured": 4}}))
    first = lines[:12]
    assert first[1].startswith("program python tests/programs/detect_like.py --model yolov8n --img-size 64 ")
    assert _screen(tmp_path / "run", 100)[1].split() == ["program", *COMMAND.split()]  # relative to its folder
    assert f"inputs {A} (2 warm-up, 4 measured) in the timing pass" in _joined(first)
    assert f"0.131 GFLOPs at {A};" in _joined(first)
    assert all(cell_len(line.rstrip()) <= 80 for line in lines)


def test_a_long_command_is_cut_to_one_line_in_the_terminal_and_kept_whole_in_markdown(tmp_path: Path) -> None:
    argv = ["/home/user/project/detect.py", "--source", "inference/images/" + "x" * 120, "--conf", "0.4"]
    run_dir = _run(tmp_path, {A: {"warmup": 2, "measured": 4}}, argv=argv)
    lines = _screen(run_dir)
    assert lines[1].startswith("program python detect.py --source inference/images/xxx")
    assert lines[1].rstrip().endswith("…") and cell_len(lines[1].rstrip()) == 80
    assert lines[2].startswith("inputs ")  # no second line of the command
    text = render_markdown(analyse(RunData.load(run_dir)))
    assert f"- **program**: python detect.py --source inference/images/{'x' * 120} --conf 0.4" in text


def test_several_measured_shapes_give_the_mean_gflops_and_each_shapes(tmp_path: Path) -> None:
    shapes = {B: {"warmup": 1, "measured": 2}, A: {"measured": 6}}
    run_dir = _run(tmp_path, shapes, at=B, flops_by_shape={B: 131_159_808, A: 87_439_872})
    first = _joined(_screen(run_dir)[:12])
    assert f"inputs {B} (1 warm-up, 2 measured) · {A} (6 measured) in the timing pass" in first
    mean = (2 * 0.131159808 + 6 * 0.087439872) / 8
    assert (
        f"{mean:.3g} GFLOPs, the mean over the 8 measured forwards (2 at {B}: 0.131 GFLOPs, 6 at {A}: 0.0874 GFLOPs)"
        in first
    )
    header = dict(_header(run_dir))
    assert header["model"].endswith(f"0.0874 GFLOPs); the layer table's FLOPs are at {B}")


def test_a_warm_up_shape_no_measured_forward_had_is_not_the_headline(tmp_path: Path) -> None:
    shapes = {W: {"warmup": 1}, A: {"measured": 4}}
    run_dir = _run(tmp_path, shapes, at=W, flops_by_shape={W: 21_000_000, A: 87_439_872})
    first = _joined(_screen(run_dir)[:12])
    assert f"0.0874 GFLOPs at {A}, the measured forwards' shape;" in first and "0.021" not in first
    assert dict(_header(run_dir))["model"].endswith(
        f"the layer table's FLOPs are at {W}, a shape no measured forward had"
    )


def test_a_figure_at_a_shape_no_measured_forward_had_says_so() -> None:
    warm_only = MeasuredFlops(W, 0.021, (ShapeFlops(A, 4, None),), (A,))
    assert warm_only.headline() == (
        f"0.021 GFLOPs at {W}, a shape no measured forward had (they had: 4 at {A}, FLOPs not counted)"
    )
    some = MeasuredFlops(A, 2.5, (ShapeFlops(A, 3, 2.5), ShapeFlops(B, 1, None)), (B,))
    assert some.mean is None
    assert some.headline() == (
        f"2.50 GFLOPs at {A}, the shape of 3 of the 4 measured forwards (the others: 1 at {B}, FLOPs not counted)"
    )
    assert MeasuredFlops(A, 20.9, ()).headline() == f"20.90 GFLOPs at {A}"  # an older run: no shapes recorded
    assert MeasuredFlops(A, 20.9, (ShapeFlops(A, 5, 20.9),)).layer_table_note() == ""


def test_the_command_is_shown_as_typed() -> None:
    script = ProgramDoc.of(argv=["/w/app/detect.py", "--source", "a b"], cwd="/w")
    assert program_command(script) == "python app/detect.py --source 'a b'"
    elsewhere = ProgramDoc.of(argv=["/opt/detect.py"], cwd="/w")
    assert program_command(elsewhere) == "python /opt/detect.py"
    assert program_command(ProgramDoc.of(argv=["-m", "pkg.detect", "-v"], cwd="/w")) == "python -m pkg.detect -v"


def _header(run_dir: Path) -> list[tuple[str, str]]:
    from hwprof.render.report import header_lines

    return header_lines(analyse(RunData.load(run_dir)))


def _runner(measured: int, planned: int, how: str = "returned", exit_code: int | None = None) -> Any:
    """A program pass as program_record reads it: its driver's schedule (`planned` measured steps and as many clean
    ones: a paired pass, whose schedule --iters (4 here) does not bound), the calls it made, how the program
    ended."""
    steps = [(True, i) for i in range(planned)] + [(False, i) for i in range(planned)]
    driver = SimpleNamespace(steps=steps, calls=SimpleNamespace(measured=measured), done=False)
    end = SimpleNamespace(how=how, error=None, ok=how in ("returned", "stopped", "exit"), exit_code=exit_code)
    return SimpleNamespace(
        driver=driver,
        end=end,
        whole_process=False,
        finder=None,
        spec=SimpleNamespace(model_path=None),
        config=SimpleNamespace(iters=4),
    )


def test_a_pass_that_made_some_of_its_measured_calls_says_how_many() -> None:
    assert _ended(_runner(4, 6), "ok", None) == "ended after 4 of its 6 measured calls"
    assert _ended(_runner(0, 6), "ok", None) == "ended before the measured calls"
    assert _ended(_runner(2, 4, "exit"), "ok", None) == "ended after 2 of its 4 measured calls (sys.exit)"
    assert _ended(_runner(6, 6), "ok", None) == "ran to its end"
    assert _ended(_runner(4, 4, "stopped"), "ok", None) == "stopped after the measured calls"


def test_a_program_that_ended_among_its_measured_calls_made_all_its_calls() -> None:
    """advise counts the calls of a pass that saw the program end by itself as all it makes."""
    ended = ProgramOutcome.of(calls=9, ended="ended after 4 of its 6 measured calls", model="model")
    seen = calls_seen([("layers", ended)])
    assert seen is not None and seen.exact and seen.calls == 9
