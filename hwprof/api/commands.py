"""hwprof.collect, hwprof.advise, hwprof.compare and hwprof.gate: the library's front door, with the command line's
commands behind it.

collect and advise take typed keyword arguments (each the command line's option of that name: `imgsz=160` is
`--imgsz 160`), make the same typed request the command line makes from its options (hwprof.api.requests), and
run it with the same functions (hwprof.api.collecting, hwprof.api.advising): the passes are the same child
processes with the same progress bars (Rich draws them in a terminal and in Jupyter), the stop signals end them
the same way, and a value no pass could run with is a ValueError with the line the command line prints after
`hwprof: error:`. A keyword that is not an option is Python's TypeError (and mypy's error before the call); a
value of the wrong type is a ValueError naming the option. What the command prints besides (the passes, the
warnings) goes to the `console` given, else to Rich's console on stdout.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import polars as pl

from hwprof.api.dtypes import table
from hwprof.api.errors import RunError
from hwprof.api.requests import AdviseRequest, CollectRequest, CompareRequest, csv_list, gate_options, program_of
from hwprof.api.run import Run, load
from hwprof.api.sweeping import SweepRequest
from hwprof.core.config import ADVISE_BLOCKS, RunConfig, default_threads, until_resolved

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console

    from hwprof.analysis.advice.table import Advice
    from hwprof.analysis.gate.verdict import Verdict
    from hwprof.analysis.sweep.rows import SweepResult
    from hwprof.session.stopping import StopSignals

StrPath = str | os.PathLike[str]
T = TypeVar("T")
_D = RunConfig
_S = SweepRequest


def collect(
    model: str | None = None,
    program: Sequence[str] | None = None,
    *,
    runtime: str = _D.runtime,
    precision: str = _D.precision,
    device: str = _D.device,
    channels_last: bool = False,
    weights: StrPath | None = None,
    images: StrPath | None = None,
    annotate: StrPath | None = None,
    imgsz: int = _D.imgsz,
    rect: bool = False,
    batch: int = _D.batch,
    threads: int | None = None,
    warmup: int | None = None,
    iters: int | None = None,
    depth: int = _D.depth,
    conf: float = _D.conf,
    iou: float = _D.iou,
    seed: int = _D.seed,
    only: Sequence[str] = (),
    skip: Sequence[str] = (),
    events: Sequence[str] = (),
    counters: str = _D.counters,
    counter_reads: str = _D.counter_reads,
    counter_threads: str = _D.counter_threads,
    interval_ms: float = _D.interval_ms,
    pyspy_rate: int = _D.pyspy_rate,
    pyspy_native: bool = False,
    perf_rate: int = _D.perf_rate,
    scalene_memory: bool = False,
    profiler_stack: bool = False,
    timeout: float = _D.pass_timeout_s,
    budget: float = _D.budget_s,
    program_model: str | None = None,
    program_end: str = "stop",
    stage: Sequence[str] = (),
    program_stdin: StrPath | None = None,
    out: StrPath | None = None,
    results: StrPath = "results",
    report: bool = False,
    advise: bool = False,
    advise_blocks: int = ADVISE_BLOCKS,
    advise_no_layers: bool = False,
    advise_only: Sequence[str] = (),
    console: Console | None = None,
) -> Run:
    """`hwprof collect --model MODEL [options]` (or `hwprof collect [options] -- PROGRAM...` with `program`, the
    program's command as a list of words), then the run it made. Each keyword is collect's option of that name
    (`only=["timing", "flops"]` is `--only timing,flops`, `stage=["nms=utils:nms"]` is `--stage ...` once per
    item, `threads=None` this process's CPUs, `iters=None` and `warmup=None` each pass stopping once resolved and
    warm, `budget` in seconds); out is the run directory (default: results/<model>-<time> under `results`), console
    a Rich Console for what it prints. The report is not printed (report=True prints it; Run.report() does later);
    advise=True runs `--advise` after the passes (advise_blocks, advise_no_layers, advise_only as --advise-*).

    A run whose passes or collectors failed is returned as it is (status "partial"; Run.unavailable says what
    failed), as the command line keeps it and exits 1. ValueError for a bad value, an unknown model or
    collector, an out in use; KeyboardInterrupt when stopped (what ran is kept)."""
    return _collect(dict(locals()))


NOT_CONFIG = (
    "model", "program", "weights", "images", "annotate", "threads", "only", "skip", "events", "rect", "timeout",
    "budget", "iters", "warmup", "program_model", "program_end", "stage", "program_stdin", "out", "results", "report",
    "advise", "advise_blocks", "advise_no_layers", "advise_only", "console",
)  # fmt: skip
"""collect's keywords that are not RunConfig's field of that name with the value as given."""


def _collect(given: dict[str, Any]) -> Run:
    from hwprof.api.collecting import run_collect

    console = _console(given["console"])
    collected = _library_call(lambda stop: run_collect(_collect_request(given), console, stop))
    return load(collected.run_dir)


def _collect_request(given: dict[str, Any]) -> CollectRequest:
    """collect's keywords as the request the command line makes of the same options."""
    program = given["program"]
    config = RunConfig(
        **{name: value for name, value in given.items() if name not in NOT_CONFIG},
        model=given["model"] if given["model"] is not None else _D.model,
        weights=_path_or_none(given["weights"]),
        images=_path_or_none(given["images"]),
        annotate=_path_or_none(given["annotate"]),
        threads=given["threads"] if given["threads"] is not None else default_threads(),
        only=_words(given["only"], "only"),
        skip=_words(given["skip"], "skip"),
        events=_words(given["events"], "events"),
        pass_timeout_s=given["timeout"],
        budget_s=given["budget"],
        iters=given["iters"] if given["iters"] is not None else _D.iters,
        warmup=given["warmup"] if given["warmup"] is not None else _D.warmup,
        extra={"rect": given["rect"], **until_resolved(given["iters"], given["warmup"])},
        program=program_of(
            _words(program, "program") if program is not None else None,
            given["program_model"],
            given["program_end"],
            _words(given["stage"], "stage"),
            _path_or_none(given["program_stdin"]),
        ),
    )
    advise = AdviseRequest(
        given["advise_blocks"], not given["advise_no_layers"], tuple(_words(given["advise_only"], "advise_only"))
    )
    shown = {k: v for k, v in given.items() if k in _DEFAULTS_OF_COLLECT and v != _DEFAULTS_OF_COLLECT[k]}
    return CollectRequest(
        config,
        out=Path(given["out"]) if given["out"] is not None else None,
        results=Path(given["results"]),
        report=given["report"],
        advise=advise if given["advise"] else None,
        command_line=(f"hwprof.collect({', '.join(f'{k}={v!r}' for k, v in shown.items())})",),
    )


def _words(values: Sequence[str] | str, name: str) -> list[str]:
    """A list option's items (a comma string is taken as the command line takes it)."""
    if isinstance(values, str):
        return csv_list(values)
    if not all(isinstance(v, str) for v in values):
        raise ValueError(f"{name} is a list of strings (got {list(values)!r})")
    return list(values)


def _path_or_none(value: StrPath | None) -> str | None:
    return None if value is None else os.fspath(value)


def _console(console: Console | None) -> Console:
    from rich.console import Console

    return console or Console()


def _library_call(
    run: Callable[[StopSignals], T],
    where: Path | None = None,
    *,
    forward: signal.Signals | None = signal.SIGTERM,
    kept: Callable[[T], str] | None = None,
    collecting: bool = True,
) -> T:
    """`run(stop)` under the command line's stop signals (hwprof.session.stopping; `forward`: what a running
    child gets, None: the signal received, as a sweep's points do); its exceptions become the library's:
    ValueError for a bad input, RunError for a run directory that cannot be written or is gone, each with the
    command line's line; KeyboardInterrupt, naming what was kept (`kept(result)`, else `where`), when a signal
    stopped it. `collecting`: the HWPROF_* overrides are checked first, as for the commands that run collectors."""
    from hwprof.core.atomic import DiskFullError, FolderGoneError
    from hwprof.core.envvars import environment_warning
    from hwprof.core.uservalue import exception_line
    from hwprof.rundir.reader import RunDirError
    from hwprof.session.plan import CollectError
    from hwprof.session.stopping import StopSignals

    stop = StopSignals(forward=forward).install()
    try:
        warning = environment_warning(collecting=collecting)
        if warning is not None:
            print(warning, file=sys.stderr)
        done = run(stop)
    except (DiskFullError, FolderGoneError, RunDirError) as exc:
        raise RunError(exception_line(exc)) from exc
    except (ValueError, OSError, CollectError) as exc:
        raise ValueError(exception_line(exc)) from exc
    finally:
        stop.ending = True  # before any call: a stop delivered at uninstall()'s entry is noted, not raised
        stop.uninstall()
    if stop.requested:
        where = where or getattr(done, "run_dir", None)  # advise's run, or the run directory collect made
        line = f": what ran is kept in {where}, hwprof.load({str(where)!r}) reads it" if where else ""
        raise KeyboardInterrupt(f"stopped by {stop.name}{kept(done) if kept is not None else line}")
    return done


def advise(
    run: Run | StrPath,
    *,
    blocks: int = ADVISE_BLOCKS,
    no_layers: bool = False,
    only: Sequence[str] = (),
    console: Console | None = None,
) -> Run:
    """`hwprof advise RUN [options]`: run the changes the run's findings point to, each measured against the run
    (blocks=8, no_layers=True, only=["channels_last", "onnxruntime"]), write advice.json, and return the run read
    again, with its advice table. RunError for a run directory that is not one, damaged, or in use by a
    collect; ValueError for a bad option."""
    from hwprof.api.advising import advise_and_render

    path = run.path if isinstance(run, Run) else Path(run)

    def advise_run(stop: StopSignals) -> Advice:
        request = AdviseRequest(blocks, not no_layers, tuple(_words(only, "only")))
        return advise_and_render(path, request, _console(console), stop)

    _library_call(advise_run, where=path)
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

    request = CompareRequest(tuple(_path_of(r) for r in (a, b, *more)))
    runs = [r if isinstance(r, Run) else load(r) for r in (a, b, *more)]
    c = compare_analyses([r.analysis for r in runs], list(request.runs))
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


def gate(
    base: Run | StrPath,
    new: Run | StrPath,
    fail_above: str | float = "5%",
    *,
    share: str | float = "2%",
    unresolved: str = "pass",
    confidence: str | float = "95%",
    resamples: int = 2000,
    seed: int = 0,
    count_threshold: str | float = "0.5%",
    miss_threshold: str | float | None = None,
    gate_different: bool = False,
    gate_on: str = "both",
    layer_stat: str = "share",
    paired: int = 0,
    gate_report: StrPath | None = None,
    junit: StrPath | None = None,
    gate_json: StrPath | None = None,
) -> Verdict:
    """`hwprof compare BASE NEW --fail-above 5%`'s verdict, without printing: `verdict.exit_code` (0 pass or not
    resolved, 1 fail), `verdict.outcome` ("pass", "fail", "not resolved"), `verdict.line`, and every gated figure
    (`verdict.figures`: name, medians or counts, ratio, bootstrap interval, outcome). The keywords are compare's
    gate options (share is --gate-share); paired=N measures BASE's and NEW's configurations again in N ABBA
    blocks (--paired N, child processes: a stop signal ends them and raises KeyboardInterrupt); gate_report,
    junit, gate_json write the verdict's files. ValueError (one line) where the gate cannot be meaningful;
    RunError for a run directory that is missing, damaged or still being collected."""
    from hwprof.api.comparing import gate_and_write

    request = _gate_request(dict(locals()))
    for r in (base, new):
        if not isinstance(r, Run):
            load(r)  # RunError for a damaged or running run
    return _library_call(lambda stop: gate_and_write(request, stop), collecting=False)


def _gate_request(given: dict[str, Any]) -> CompareRequest:
    """gate's keywords as the request `hwprof compare BASE NEW --fail-above ...` makes of the same options."""
    named = ("share", "unresolved", "confidence", "resamples", "seed", "count_threshold", "miss_threshold")
    more = ("gate_different", "gate_on", "layer_stat", "paired")
    opts = gate_options(given["fail_above"], **{name: given[name] for name in (*named, *more)})
    files = [Path(given[name]) if given[name] is not None else None for name in ("gate_report", "junit", "gate_json")]
    return CompareRequest(
        (_path_of(given["base"]), _path_of(given["new"])),
        gate=opts,
        paired=given["paired"],
        gate_report=files[0],
        junit=files[1],
        gate_json=files[2],
    )


def _path_of(run: Run | StrPath) -> Path:
    return run.path if isinstance(run, Run) else Path(run)


def run_sweep(
    models: Sequence[str] = (),
    *,
    runtimes: Sequence[str] = _S.runtimes,
    precisions: Sequence[str] = _S.precisions,
    threads: Sequence[int] = (),
    batch: Sequence[int] = _S.batch,
    device: str = _S.device,
    imgsz: int = _S.imgsz,
    iters: int = _S.iters,
    warmup: int = _S.warmup,
    timeout: float | None = None,
    out: StrPath = _S.out,
    advise: bool = False,
    collect_args: Sequence[str] = (),
    format: str = _S.format,
    ray: str | None = None,
    per_host: bool = False,
    hosts: Sequence[str] = (),
    resume: StrPath | None = None,
    local: bool = False,
    console: Console | None = None,
) -> SweepResult:
    """`hwprof sweep --models ... [options] [-- COLLECT_OPTIONS]`: one collect per point (models x runtimes x
    precisions x threads x batch), each a child process, here or on the Ray cluster at `ray` (HOST:PORT or
    "auto"); then the table printed (format: rich, markdown, html) and sweep.json, sweep.csv, sweep.png and
    sweep.html written under `out`. Each keyword is sweep's option of that name (`threads=[1, 4]` is
    `--threads 1,4`, collect_args the collect options after `--`, `threads=()` this machine's CPUs, on Ray each
    node's own); resume=DIR runs the points of the sweep in DIR that did not finish, with its recorded options.
    Returns the sweep (SweepResult: a row per point with its status, the notes); a point that failed is a row
    of status "failed", as the command line keeps it and exits 1. ValueError for a bad value or an unknown
    model; KeyboardInterrupt when stopped (the finished points are kept, and resume=out runs the rest)."""
    given = dict(locals())  # the keywords, before any other name is bound here
    from hwprof.api.sweeping import run_sweep_request

    def kept(result: SweepResult) -> str:
        where = str(result.out_root)
        return f": the finished points are kept in {where}, hwprof.run_sweep(resume={where!r}) runs the rest"

    def run(stop: StopSignals) -> SweepResult:
        return run_sweep_request(_sweep_request(given), _console(console), stop)

    return _library_call(run, forward=None, kept=kept)


def _sweep_request(given: dict[str, Any]) -> SweepRequest:
    """run_sweep's keywords as the request the command line makes of the same options (SweepRequest takes each
    list as a tuple, a comma string of names as the command line takes it, and each path as a Path)."""
    return SweepRequest(**{name: value for name, value in given.items() if name != "console"})


_DEFAULTS_OF_COLLECT: dict[str, object] = {
    name: p.default for name, p in __import__("inspect").signature(collect).parameters.items() if name != "console"
}
"""collect's keyword defaults: run.json's command names the keywords given with another value."""
