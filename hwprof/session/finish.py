"""Finishing a run: the summary sections of run.json from its passes, then the analysis and its exports
(layers.csv, summary.json). It sits above both analysis and render, so that the run-directory reader only
reads.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.text import Text

from hwprof.analysis.paired_cost import PassCostFigure
from hwprof.analysis.run_analysis import Analysis, analyse
from hwprof.analysis.workload import workload_view
from hwprof.core.atomic import DiskFullError
from hwprof.core.spans import forward_p50_ms, frames_per_second, program_stage_stats, stage_stats
from hwprof.render.export import report_files
from hwprof.render.report import TOP_DEFAULT, check_options, render_rich, report
from hwprof.rundir.lock import clear_dead_holders_reserve
from hwprof.rundir.names import PLOT_FILES, REPORT_HTML, RUN_JSON
from hwprof.rundir.reader import RunData
from hwprof.rundir.writer import write_plot_files, write_report_files, write_report_html, write_run_json
from hwprof.schema.codec import json_value
from hwprof.schema.detections import DetectionsDoc
from hwprof.schema.run import ModelDoc, RunDoc, StageLatency
from hwprof.schema.run_passes import PassCostDoc
from hwprof.schema.summaries_cpu import FlopsSummary, TimingSummary
from hwprof.trace.forked import BuiltTrace, TraceChild


def finalize(run_dir: Path, run: RunDoc) -> RunData:
    """Derive the summary sections of run.json from the passes and save run.json (exports: write_final_exports).
    Where deriving them fails, run.json is still saved with the run's final status and the error under
    "finish_error" (then the error is raised): a run whose passes all finished never stays "running".

    Returns the finished run, with the markers the derivation parsed: the exports, the report and the trace
    of the collect read them from it, parsed once."""
    try:
        data = _derive_summaries(run_dir, run)
    except DiskFullError:
        raise
    except Exception as exc:
        run.update(finish_error=f"the summary sections of run.json could not be derived: {type(exc).__name__}: {exc}")
        write_run_json(run_dir, run)
        raise
    write_run_json(run_dir, run)
    return replace(data, warnings=[])  # its copy reads the markers' warnings again, in the analysis's order


def _derive_summaries(run_dir: Path, run: RunDoc) -> RunData:
    """The summary sections set in `run`; the RunData (of `run`) they were derived from."""
    data = RunData(Path(run_dir), run)
    info = data.model_file
    if info:
        flops = data.summary(FlopsSummary)
        model = ModelDoc.of(
            **info.identity(without=("init",)),  # model.json's init is written last, and only where there is one
            layers=info.top_level_layers,
            input_shape=info.input_shape,
            flops=flops.total_flops,
            gflops=flops.gflops,
        )
        if info.init:
            model.update(init=info.init)
        run.update(model=model)
    source = "timing" if "timing" in data.pass_names else next(iter(data.pass_names), None)
    if source:
        # a program's own code between its stages is a stage of its own, "other" (hwprof.analysis.workload)
        per_iteration = program_stage_stats if workload_view(run).unclaimed_stage else stage_stats
        stats = per_iteration(data.markers(source))
        run.update(
            stages={k: StageLatency.of(**v.to_dict()) for k, v in stats.items()},
            stages_source=source if source == "timing" else f"{source} (no clean timing pass: hooks included)",
        )
        whole = stats.get("iteration")
        batch = _batch(run) if whole else None  # a run with no iteration stage (an imported one) needs none
        if whole and batch:
            run.update(fps=frames_per_second(batch, whole.p50_ms))
        clean = run.entry(TimingSummary.NAME).summary
        if isinstance(clean, TimingSummary) and batch:
            clean_whole = (clean.stages or {}).get("iteration")
            if clean_whole is not None and clean_whole.p50_ms:  # a program's batch: its model's, not --batch
                clean.fps = frames_per_second(batch, clean_whole.p50_ms)
        detections = _detections(data, source)
        if detections is not None:
            run.update(detections=detections)
    _pass_costs(data, run)
    return data


def _pass_costs(data: RunData, run: RunDoc) -> None:
    """Each pass's entry in run.json's passes: its forward p50 against the timing pass's, and what its collectors
    cost (hwprof.analysis.paired_cost.pass_figures)."""
    from hwprof.analysis.paired_cost import pass_figures

    where = str(data.root / RUN_JSON)
    timing = data.markers("timing") if "timing" in data.pass_names else None
    base = forward_p50_ms(timing) if timing else None
    for name in data.pass_names:
        markers = data.markers(name)
        p50 = forward_p50_ms(markers)
        entry = run.passes[name]
        entry.update(forward_p50_ms=p50, overhead_vs_timing=p50 / base if (p50 and base) else None)
        if name != "timing":
            inputs = entry.inputs.by_iteration() if entry.inputs is not None else None
            figures = pass_figures(markers, timing, data.pass_result(name).paired, entry.collectors or [], inputs)
            prefix = f"passes.{name}."
            entry.update(
                overhead=_cost_doc(figures.overhead, where, f"{prefix}overhead."),
                overhead_pass_level=_cost_doc(figures.overhead_pass_level, where, f"{prefix}overhead_pass_level."),
            )


def _detections(data: RunData, source: str) -> DetectionsDoc | None:
    """The boxes NMS kept, from the pass the stages come from (the timing pass), else the first pass that
    recorded them (None: no pass did: a program's run, an older worker)."""
    names = [source, *(n for n in data.pass_names if n != source)]
    for name in names:
        if name not in data.pass_names:
            continue
        found = data.pass_result(name).detections
        if found:
            return found
    return None


def _cost_doc(figure: PassCostFigure | None, where: str, prefix: str) -> PassCostDoc | None:
    """A pass's cost figure as run.json holds it (None: none could be worked out)."""
    return None if figure is None else PassCostDoc.from_json(json_value(figure.to_dict()), where, prefix)


def _batch(run: RunDoc) -> int | None:
    """The run's batch size, for the frames per second (a run.json without one cannot give them): a program's is
    its model's sample input's first dimension (None: not recorded)."""
    if run.config.program is None and run.config.batch is None:
        raise KeyError("batch")  # as the dict read said it
    return run.batch


def write_final_exports(data: RunData) -> Analysis:
    """layers.csv and summary.json from the finalised run (a second stop signal may cut this, not run.json);
    a full disk here is recorded in run.json's render_errors (the collection itself is complete). Returns
    the analysis, for the collect's report."""
    analysis = analyse(data)
    try:
        write_report_files(data.root, report_files(analysis))
    except DiskFullError as exc:
        record_render_error(data.root, data.doc, "exports", exc)
        raise
    return analysis


def report_run(
    run_dir: Path | str,
    top: int = TOP_DEFAULT,
    format: str = "rich",
    console: Console | None = None,
    write: bool = True,
    plots: bool | None = None,
    held: contextlib.AbstractContextManager[object] | None = None,
) -> Analysis:
    """`hwprof report`: load the run directory, analyse it, print the report in `format` to `console`.

    write: also (re)write summary.json and the enriched layers.csv in the run directory; a run
    directory that cannot be written to (a read-only copy) only gets a warning.
    plots: (re)draw the PNG plots too; None draws them only when the run directory has none yet
    (matplotlib costs about a second, and the plots of a run do not change between reports).
    held: where the command's stop signals are held off (its StopSignals.deferred()), entered while matplotlib's
    C extensions initialise (write_report).
    """
    check_options(top, format)
    console = console or Console()
    data = RunData.load(run_dir)
    if write:  # a collect killed with SIGKILL left its space reserve: whoever can take the lock removes it
        clear_dead_holders_reserve(data.root)
    analysis = analyse(data)
    report(analysis, console, top, format)
    if write or format == "html":
        draw = plots if plots is not None else not data.has_files(PLOT_FILES)
        written = write_report(analysis, data, console, plots=draw, held=held)
        if written and format == "rich":
            names = ", ".join(p.name for p in written)
            console.print(Text(f"written in {data.root}: {names}", style="dim"))
    if format == "html":  # the page on standard output, as the other formats are (report.html written beside it)
        from hwprof.render.html import render_html

        out = console.file or sys.stdout
        out.write(render_html(analysis, data.files_bytes(PLOT_FILES), data.root))
        out.flush()
    return analysis


def report_after_collect(
    analysis: Analysis, data: RunData, console: Console, top: int = TOP_DEFAULT, write: bool = True
) -> Analysis:
    """The end of `collect`: the full Rich report of the finished run's analysis, and its files."""
    render_rich(analysis, console, top)
    if write:
        write_report(analysis, data, console)
    return analysis


def write_report(
    a: Analysis,
    data: RunData,
    console: Console,
    plots: bool = True,
    held: contextlib.AbstractContextManager[object] | None = None,
) -> list[Path]:
    """The report's files (summary.json, layers.csv, advice.csv, the plots, report.html) into the run directory;
    a run directory that cannot be written to only gets a warning, a full disk is a failure with the path.
    plots: draw the plots (False: report.html embeds those the run directory already holds).
    held: a section in which the command's stop signals are held off (StopSignals.deferred(): raised after it),
    entered while matplotlib's C extensions initialise: a signal inside one's init ended `hwprof report` in
    "ImportError: initialization failed" or in a fatal error at its exit."""
    from hwprof.render.html import render_html

    written: list[Path] = []
    try:
        written += write_report_files(data.root, report_files(a))
        if plots:
            from hwprof.render.figures import import_matplotlib
            from hwprof.render.plots import render_plots

            with held if held is not None else contextlib.nullcontext():
                import_matplotlib()

            drawn = render_plots(a)
            written += write_plot_files(data.root, drawn)
        else:
            drawn = data.files_bytes(PLOT_FILES)
        written.append(write_report_html(data.root, render_html(a, drawn, data.root)))
    except DiskFullError:  # a failure with the path (exit 1), not a warning
        raise
    except OSError as exc:
        console.print(
            f"[yellow]warning:[/] could not write the report's files into {data.root}: {exc}", highlight=False
        )
    return written


def refresh_report_page(a: Analysis, data: RunData, console: Console) -> Path | None:
    """report.html again, once the trace it points to was built: the page states whether trace.pftrace exists
    (`hwprof trace RUN` where it does not), and a collect writes the page before its trace. Only the page is
    written (the plots it embeds are those the run directory holds); None where there is no page to refresh."""
    from hwprof.render.html import render_html

    if not (data.root / REPORT_HTML).is_file():
        return None
    try:
        return write_report_html(data.root, render_html(a, data.files_bytes(PLOT_FILES), data.root))
    except DiskFullError:
        raise
    except OSError as exc:
        console.print(f"[yellow]warning:[/] could not write {data.root / REPORT_HTML} again: {exc}", highlight=False)
        return None


def record_render_error(run_dir: Path, run: RunDoc, what: str, exc: DiskFullError) -> None:
    """The collection is complete but a rendering of it could not be written for lack of space:
    run.json keeps its status and lists the failure under "render_errors" (when run.json itself still
    fits; atomic writes leave it whole as it was when it does not)."""
    run.update(render_errors=[*(run.render_errors or []), {"what": what, "path": str(exc.path), "error": str(exc)}])
    with contextlib.suppress(DiskFullError):
        write_run_json(run_dir, run)


def write_trace(
    run_dir: Path,
    console: Console,
    data: RunData | None = None,
    out: Path | None = None,
    beside: TraceChild | None = None,
) -> bool:
    """Build the run's trace.pftrace (or `out`; from `data` when the run is already read); False (with one error
    line) when it could not be built. A folder that cannot be written raises NotWritableError (one line, with
    the fix): nothing else can be tried there. `beside`: a child building it already (the collect's, beside its
    report): its trace is taken, and only where it built none is the trace built here."""
    from hwprof.core.atomic import DiskFullError, NotWritableError, is_not_writable
    from hwprof.trace.perfetto import build_trace

    built = beside.result() if beside is not None else None
    if built is not None:
        _say_built(console, built)
        return True
    try:
        stats = build_trace(run_dir, out, data=data)
    except DiskFullError:  # a failure with the path, not a trace problem
        raise
    except OSError as exc:
        if not is_not_writable(exc):
            return _trace_failed(console, exc)
        folder = out.parent if out is not None else Path(run_dir)
        fix = (
            "choose another --out"
            if out is not None
            else f"nothing was changed; write the trace elsewhere with `hwprof trace {run_dir} --out "
            "DIR/trace.pftrace`, or copy the run directory to a writable place"
        )
        raise NotWritableError(folder, exc.errno or 0, fix) from exc
    except Exception as exc:  # the trace is one view among several: the run stays usable without it
        return _trace_failed(console, exc)
    _say_built(console, BuiltTrace.of(stats))
    return True


def _say_built(console: Console, built: BuiltTrace) -> None:
    """The line that says where the trace is and how to open it."""
    samples = (
        f"; its {built.perf_samples} CPU samples are on each thread's Callstacks track (select a layer's range "
        "for their flamegraph)"
        if built.perf_samples
        else ""
    )
    console.print(
        f"trace: {built.path} ({built.size_bytes / 1e6:.1f} MB, built in {built.build_s:.1f} s): "
        f"open it at https://ui.perfetto.dev (Open trace file){samples}",
        highlight=False,
    )


def _trace_failed(console: Console, exc: BaseException) -> bool:
    console.print(
        f"[red]hwprof: error:[/] the Perfetto trace could not be built: {type(exc).__name__}: {exc}", soft_wrap=True
    )
    return False
