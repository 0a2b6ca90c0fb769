"""hwprof.collect, hwprof.advise and hwprof.compare: the command line's own commands, called from Python.

collect and advise are `hwprof collect` and `hwprof advise`: the options are the command line's (a keyword
`imgsz=160` is `--imgsz 160`), parsed by its parser and run by its command, so the passes are the same child
processes with the same progress bars (Rich draws them in a terminal and in Jupyter), the stop signals end them
the same way, and a bad option is a ValueError with the line the command line prints after `hwprof: error:`
(argparse's own line for an option it refuses). What the command prints besides (the passes, the warnings) goes
to the `console` given, else to Rich's console on stdout.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import polars as pl

from hwprof.api.errors import RunError
from hwprof.api.frames import table
from hwprof.api.run import Run, load

if TYPE_CHECKING:
    from rich.console import Console

    from hwprof.analysis.gate import Verdict

StrPath = str | os.PathLike[str]


class OptionError(argparse.ArgumentParser):
    """The command line's parser, raising ValueError with argparse's line instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise ValueError(message)


def option_words(command: str, options: dict[str, Any]) -> list[str]:
    """Keyword options as the command line's words: name -> --name (underscores as dashes); True for a flag that
    takes no value, False or None left out; a list or tuple comma-joined (--only, --events), or repeated for an
    option given more than once (--stage); anything else as str(value)."""
    from hwprof.cli.args import build_parser

    # argparse keeps a command's parser and its options in attributes it does not document (_actions): they are
    # what tells a flag (--rect) from an option with a value (--imgsz 160) and --stage from a comma list
    commands = next(a for a in build_parser(OptionError)._actions if isinstance(a, argparse._SubParsersAction))
    actions = {s: a for a in commands.choices[command]._actions for s in a.option_strings}
    words: list[str] = []
    for name, value in options.items():
        option = "--" + name.replace("_", "-")
        action = actions.get(option)
        if value is None or value is False:
            continue
        if value is True and action is not None and action.nargs == 0:
            words.append(option)
        elif isinstance(value, list | tuple) and isinstance(action, argparse._AppendAction):
            for item in value:
                words += [option, str(item)]
        elif isinstance(value, list | tuple):
            words += [option, ",".join(str(v) for v in value)]
        else:
            words += [option, str(value)]
    return words


def _run(words: list[str], console: Console | None) -> argparse.Namespace:
    """Parse and run one command as the command line does; its exceptions become the library's (ValueError for a
    bad input, RunError for a run directory that cannot be written or is gone), with the command line's line.
    Returns the parsed arguments (collect leaves its run directory in run_dir)."""
    from rich.console import Console

    from hwprof.cli.args import build_parser
    from hwprof.cli.main import install_stop, parse_command, run_command
    from hwprof.core.atomic import DiskFullError, FolderGoneError
    from hwprof.core.uservalue import exception_line
    from hwprof.rundir.reader import RunDirError
    from hwprof.session.plan import CollectError

    args = parse_command(words, build_parser(OptionError))
    args.command_line = ["hwprof", *words]
    stop = install_stop(args)
    try:
        run_command(args, console or Console())  # its exit status: 0, or 1 where passes failed (the run says so)
    except (DiskFullError, FolderGoneError, RunDirError) as exc:
        raise RunError(exception_line(exc)) from exc
    except (ValueError, OSError, CollectError) as exc:
        raise ValueError(exception_line(exc)) from exc
    finally:
        stop.uninstall()
    if stop.requested:
        where = getattr(args, "run_dir", None)
        kept = f": what ran is kept in {where}, hwprof.load({str(where)!r}) reads it" if where else ""
        raise KeyboardInterrupt(f"stopped by {stop.name}{kept}")
    return args


def collect(model: str | None = None, program: Sequence[str] | None = None, **options: Any) -> Run:
    """`hwprof collect --model MODEL [options]` (or `hwprof collect [options] -- PROGRAM...` with `program`),
    then the run it made. Options are collect's, as keywords: imgsz=160, iters=5, only=["timing", "flops"],
    out="results/mine" (the run directory; default results/<model>-<time> under `results`), console=a Rich
    Console for what it prints. The report is not printed (report=True prints it; Run.report() does later).

    A run whose passes or collectors failed is returned as it is (status "partial"; Run.unavailable says what
    failed), as the command line keeps it and exits 1. ValueError for a bad option, an unknown model or
    collector, an --out in use; KeyboardInterrupt when stopped (what ran is kept)."""
    console: Console | None = options.pop("console", None)
    report = bool(options.pop("report", False))
    if model is not None:
        options = {"model": model, **options}
    words = ["collect", *option_words("collect", {**options, "no_report": not report})]
    if program is not None:
        words += ["--", *program]
    args = _run(words, console)
    return load(args.run_dir)


def advise(run: Run | StrPath, **options: Any) -> Run:
    """`hwprof advise RUN [options]`: run the changes the run's findings point to, each measured against the run
    (blocks=8, no_layers=True, only=["channels_last", "onnxruntime"]), write advice.json, and return the run read
    again, with its advice table. RunError for a run directory that is not one, damaged, or in use by a
    collect; ValueError for a bad option."""
    console: Console | None = options.pop("console", None)
    path = run.path if isinstance(run, Run) else Path(run)
    _run(["advise", str(path), *option_words("advise", options)], console)
    return load(path)


def compare(a: Run | StrPath, b: Run | StrPath, *more: Run | StrPath) -> pl.DataFrame:
    """`hwprof compare A B ...` as a table: one row per stage (p50) and per layer (scaled self time), every
    run's ms and share (columns a_*, b_*, c_* ... in the order given), its ratio to run a (above 1: slower) and
    speed-up over it (above 1: faster), and per layer the kernel that ran it. Layers are matched by name (a class
    that differs shows in the key: "105 Detect / IDetect"); those not in every run are left out, and a warning
    lists them (a warning per note of the layer table). Runs of different models have no layer rows, and a
    warning says why."""
    import warnings

    from hwprof.analysis.compare import compare_analyses

    runs = [r if isinstance(r, Run) else load(r) for r in (a, b, *more)]
    c = compare_analyses([r.analysis for r in runs], [r.path for r in runs])
    for line in [c.layers_refused] if c.layers_refused else c.layer_notes:
        warnings.warn(line, stacklevel=2)
    letters = [chr(ord("a") + i) if i < 26 else f"r{i + 1}" for i in range(len(runs))]
    rows = []
    for section, source in (("stage", c.stages), ("layer", c.layers or [])):
        for row in source:
            out: dict[str, Any] = {"section": section, "key": row.key}
            for i, x in enumerate(letters):
                out[f"{x}_ms"] = row.values[i]
                out[f"{x}_share"] = row.shares[i] if row.shares else None
                if i:
                    out[f"{x}_ratio"] = row.ratios[i]
                    out[f"{x}_speedup"] = row.speedups[i]
                out[f"{x}_kernel"] = (row.kernels[i] or None) if row.kernels else None
            rows.append(out)
    dtypes: dict[str, pl.DataType] = {"section": pl.String(), "key": pl.String()}
    for i, x in enumerate(letters):
        dtypes |= {f"{x}_ms": pl.Float64(), f"{x}_share": pl.Float64()}
        if i:
            dtypes |= {f"{x}_ratio": pl.Float64(), f"{x}_speedup": pl.Float64()}
        dtypes[f"{x}_kernel"] = pl.String()
    return table(rows, list(dtypes), dtypes)


def gate(base: Run | StrPath, new: Run | StrPath, fail_above: str | float = "5%", **options: Any) -> Verdict:
    """`hwprof compare BASE NEW --fail-above 5%`'s verdict, without printing: `verdict.exit_code` (0 pass or not
    resolved, 1 fail), `verdict.outcome` ("pass", "fail", "not resolved"), `verdict.line`, and every gated figure
    (`verdict.figures`: name, medians or counts, ratio, bootstrap interval, outcome). Options are compare's gate
    options as keywords: share="2%", unresolved="fail", confidence="95%", resamples=2000, seed=0,
    count_threshold="0.5%", gate_different=True, gate_on="counts". ValueError (one line) where the gate cannot be
    meaningful; RunError for a run directory that is missing, damaged or still being collected."""
    from hwprof.cli.gate_args import gate_options

    words = {
        "fail_above": str(fail_above),
        "gate_share": str(options.pop("share", "2%")),
        "unresolved": options.pop("unresolved", "pass"),
        "confidence": str(options.pop("confidence", "95%")),
        "resamples": int(options.pop("resamples", 2000)),
        "seed": int(options.pop("seed", 0)),
        "count_threshold": str(options.pop("count_threshold", "0.5%")),
        "gate_different": bool(options.pop("gate_different", False)),
        "gate_on": options.pop("gate_on", "both"),
        "layer_stat": options.pop("layer_stat", "share"),
        "miss_threshold": options.pop("miss_threshold", None),
    }
    if options:
        raise ValueError(f"gate() got unknown options: {', '.join(sorted(options))}")
    if words["unresolved"] not in ("pass", "fail"):
        raise ValueError(f"unresolved must be 'pass' or 'fail' (got {words['unresolved']!r})")
    if words["layer_stat"] not in ("share", "ms"):
        raise ValueError(f"layer_stat must be 'share' or 'ms' (got {words['layer_stat']!r})")
    if words["gate_on"] not in ("both", "time", "counts"):
        raise ValueError(f"gate_on must be 'both', 'time' or 'counts' (got {words['gate_on']!r})")
    opts = gate_options(argparse.Namespace(**words, gate_report=None, junit=None, gate_json=None))
    assert opts is not None
    from hwprof.render.gate import gate_runs

    runs = [r if isinstance(r, Run) else load(r) for r in (base, new)]  # RunError for a damaged or running run
    return gate_runs([r.path for r in runs], opts)[0]
