"""The report's first screen (render/summary.py) and the "not measured" block grouped by cause (not_measured.py)."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

from rich.cells import cell_len
from rich.console import Console

from hwprof.analysis.run_analysis import analyse
from hwprof.render.not_measured import grouped_unavailable
from hwprof.rundir.reader import RunData
from hwprof.session.finish import report_run

FIXTURE = Path(__file__).parent / "fixtures" / "rundir_report"


def _report(run_dir: Path, width: int) -> list[str]:
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False, legacy_windows=False)
    report_run(run_dir, console=console, write=False)
    return buf.getvalue().splitlines()


def test_first_screen_answers_at_80_columns() -> None:
    lines = _report(FIXTURE, 80)
    screen = " ".join(" ".join(line.split()) for line in lines[:40])  # wrapped lines joined
    assert lines[0].startswith("summary of run fx [complete]")
    for key in ("model ", "weights ", "host ", "run ", "input ", "speed "):
        assert any(line.startswith(key) for line in lines[:10]), key
    assert "forward p50 2,336.0 ms, p90 3,270.5 ms" in screen and "FPS inference 0.43, end to end 0.40" in screen
    assert "where the time goes: top 5 layers" in screen
    assert "│ 22 │ Detect │ 566.4 │ 24.2% │ compute │" in screen  # the top layer, with its bound
    assert "top findings" in screen and "1. forward keeps 0.33 CPUs busy" in screen
    assert "not measured: perf_events, rapl" in screen
    assert all(cell_len(line.rstrip()) <= 80 for line in lines)
    # the long header and the "not measured" block come last
    assert lines.index("run details") > next(i for i, line in enumerate(lines) if line.startswith("findings"))


def test_not_measured_groups_one_cause_per_line(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE, run_dir, ignore=shutil.ignore_patterns("golden", "README.md"))
    a = analyse(RunData.load(run_dir))
    gpu = {"status": "unavailable", "reason": "the run is on the CPU (--device cpu)", "fix": "--device cuda"}
    kineto = {**gpu, "reason": "the run is on the CPU (--device cpu): no CUDA activity to record"}
    a.unavailable.update({"nvml": dict(gpu), "gpu_kineto": kineto, "cuda_graph": dict(gpu)})
    lines = grouped_unavailable(a)
    assert (
        "nvml, gpu_kineto, cuda_graph",
        "unavailable",
        "the run is on the CPU (--device cpu); fix: --device cuda",
    ) in lines
    assert [names for names, _, _ in lines].count("rapl") == 1
    assert lines[-1] == ("papi", "skipped", "not requested for this run")


def test_first_column_is_never_cut_at_80_columns() -> None:
    from hwprof.render.tables import Col, TableSpec, rich_render

    spec = TableSpec(
        "t",
        [Col("pass", "left"), Col("cost"), Col("why", "left", max_width=60), Col("extra", priority=1)],
        [["(between stages)", "1.25x", "w" * 60, "9"], ["kernels", "not resolved [1]", "short", "1"]],
    )
    buf = io.StringIO()
    console = Console(file=buf, width=80, color_system=None, force_terminal=False)
    console.print(rich_render(spec, console))
    text = buf.getvalue()
    assert "(between stages)" in text and "kernels" in text  # the key whole; other columns squeezed first
    assert all(cell_len(line.rstrip()) <= 80 for line in text.splitlines())


def test_the_first_screen_ends_with_what_to_run_next_and_its_advise_command_parses() -> None:
    """Issue 68: the first screen named no next step (`hwprof advise` and report.html appeared nowhere)."""
    import shlex

    from hwprof.cli.main import parse_command

    lines = _report(FIXTURE, 80)
    at = lines.index("next")
    assert at < 40, at
    block = [line.strip() for line in lines[at + 1 : at + 13]]
    advise = block[0]
    assert advise == f"hwprof advise {FIXTURE}", block
    args = parse_command(shlex.split(advise)[1:])  # the command as printed is one the command line takes
    assert args.command == "advise" and Path(args.run_dir) == FIXTURE
    assert f"{FIXTURE}/trace.pftrace" in block and f"{FIXTURE}/report.html" in block
    assert "hwprof collect --model yolov8s-people" in block  # random weights: the trained model to judge outputs


def test_an_advised_or_imported_run_is_not_told_to_advise() -> None:
    from hwprof.analysis.next_steps import next_steps

    advised = analyse(RunData.load(FIXTURE.parent / "gpu_run_yolov8n"))  # an imported GPU run, advised
    steps = next_steps(advised)
    best = next(r for r in advised.advice.ordered() if r.ranked) if advised.advice is not None else None
    assert best is not None and steps[0].command == best.how and "best measured change" in steps[0].tells
    assert not any(s.command.startswith("hwprof advise") for s in steps)
    assert not any("yolov8s-people" in s.command for s in steps)  # its weights are not random


def _repeated_sentences(lines: list[str]) -> dict[str, int]:
    """scripts/report_repeats.py's count, loaded from the checkout (the measure the issue's note repeats)."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "scripts" / "report_repeats.py"
    spec = importlib.util.spec_from_file_location("report_repeats", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.repeated_sentences(lines))


def test_the_report_says_each_thing_once_at_80_columns() -> None:
    """Issue 68: the allocator paragraph five times, 'the kernel exposes no PMU' five times, 'energy: unavailable'
    three times, 'columns left out' nine; the first screen's findings again in the list."""
    lines = _report(FIXTURE, 80)
    assert _repeated_sentences(lines) == {}
    assert sum("left out" in line for line in lines) == 1  # "left out here: N columns of M tables ...", once


def test_passes_that_stopped_alike_are_one_note_and_each_stands_whole_with_the_methods() -> None:
    """A fresh default yolov7 report said "stopped after 10 measured iterations of the 20 planned" twice (kernels
    with 4 ABBA blocks, trace with 5): the blocks are the table's column, so the note names both passes once."""
    from hwprof.render.overhead_section import overhead_spec

    a = analyse(RunData.load(FIXTURE))
    kernels, trace, scalene = (
        next(p for p in a.overheads.passes if p.name == n) for n in ("kernels", "trace", "scalene")
    )
    kernels.stopped = (
        "stopped after 10 measured iterations of the 20 planned (4 ABBA blocks, then measured alone: the cost "
        "resolved): resolved"
    )
    trace.stopped = "stopped after 10 measured iterations of the 20 planned (5 ABBA blocks): resolved"
    scalene.stopped = "ran 20 measured iterations, its plan (10 ABBA blocks): model.0's share (x) not resolved"
    spec = overhead_spec(a)
    said = [n for n in spec.notes if "measured iterations" in n]
    assert said == [
        "trace, kernels: stopped after 10 measured iterations of the 20 planned: resolved",  # the table's order
        "scalene: ran 20 measured iterations, its plan: model.0's share (x) not resolved",
    ]
    assert {f"{p.name}: {p.stopped}" for p in (kernels, trace, scalene)} <= set(spec.methods)
