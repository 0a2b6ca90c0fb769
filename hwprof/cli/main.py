"""hwprof's command line: collect, advise, report, trace, compare, sweep, doctor, models."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from hwprof.cli.args import build_parser, command_parser, split_program
from hwprof.cli.collect import cmd_collect
from hwprof.cli.doctor import cmd_doctor
from hwprof.cli.exit_codes import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from hwprof.cli.gate_args import joined_negative_percents
from hwprof.cli.runs import cmd_runs
from hwprof.cli.streams import (
    CommandConsole,
    ErrorConsole,
    OutputClosed,
    flush_stdout,
    silence_stdout,
    stdout_reader_gone,
)
from hwprof.cli.track import check_tracking, cmd_track
from hwprof.session.stopping import StopSignals

if TYPE_CHECKING:
    from hwprof.workload.catalog import ModelRow


def cmd_report(args: argparse.Namespace, console: Console) -> int:
    from hwprof.session.finish import report_run

    plots = True if args.plots else None
    report_run(args.run_dir, top=args.top, format=args.format, console=console, plots=plots, held=args.stop.deferred())
    return 0


def cmd_trace(args: argparse.Namespace, console: Console) -> int:
    """Rebuild trace.pftrace (or --out). When that fails, a trace.pftrace left by an earlier build is renamed
    trace-stale.pftrace (kept, never shown as current) and the command exits 2. A run directory that cannot be
    written is one error with the fix (hwprof.session.finish.write_trace), and nothing in it is touched."""
    from hwprof.analysis.run_analysis import analyse
    from hwprof.rundir.reader import RunData, RunDirError
    from hwprof.session.finish import refresh_report_page, write_trace

    out: Path | None = args.out
    try:  # the report's reading and checks, every file it reads: a run `report` refuses is refused here too
        data = RunData.load(args.run_dir)
        analysis = analyse(data)
    except (ValueError, OSError) as exc:
        raise RunDirError(f"{exc}{_set_aside_trace(args.run_dir) if out is None else ''}") from exc
    if write_trace(args.run_dir, console, data=data, out=out):
        if out is None:  # report.html says whether the run's trace exists
            refresh_report_page(analysis, data, console)
        return 0
    if out is None:  # the error's second line (write_trace printed its first), on standard error with it
        errors: Console = getattr(console, "errors", console)
        errors.print(_set_aside_trace(args.run_dir).removeprefix("; ") or "no trace.pftrace written", highlight=False)
        refresh_report_page(analysis, data, console)
    return EXIT_USAGE


def _set_aside_trace(run_dir: str) -> str:
    """Rename a trace.pftrace of an earlier build to trace-stale.pftrace; the words that say so, or ""."""
    from hwprof.rundir.names import TRACE_NAME

    old = Path(run_dir) / TRACE_NAME
    if not old.exists():
        return ""
    try:
        old.replace(old.with_name("trace-stale.pftrace"))
    except OSError as exc:
        why = f"it could not be renamed: {exc.strerror}"
        return f"; the {TRACE_NAME} of an earlier build is not this run as it is now ({why})"
    return f"; the {TRACE_NAME} of an earlier build was renamed trace-stale.pftrace (it is not this run as it is now)"


def cmd_compare(args: argparse.Namespace, console: Console) -> int:
    from hwprof.api.comparing import run_compare
    from hwprof.cli.gate_args import compare_request

    return run_compare(compare_request(args), console, args.stop)


def cmd_sweep(args: argparse.Namespace, console: Console) -> int:
    from hwprof.cli.sweep import cmd_sweep as run

    return run(args, console)


def cmd_models(args: argparse.Namespace, console: Console) -> int:
    from rich.table import Table

    from hwprof.workload.catalog import model_catalog

    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), console=console, transient=True
    ) as progress:
        task = progress.add_task("measuring models", total=None)

        def step(done: int, total: int, name: str) -> None:
            progress.update(task, completed=done, total=total, description=f"building {name}")
            if not console.is_terminal:  # no bar drawn: the first call builds every model (a minute), said on stderr
                print(f"hwprof models: building {name} ({done + 1} of {total})", file=sys.stderr, flush=True)

        entries = model_catalog(args.imgsz, step)
    table = Table(
        title=f"models (params after fusing; FLOPs at {args.imgsz}x{args.imgsz})",
        title_justify="left",
    )
    for col in ("model", "family", "layers", "params", "GFLOPs", "weights"):
        table.add_column(col, justify="left" if col in ("model", "family", "weights") else "right")
    for e in entries:
        table.add_row(e.name, e.family, str(e.layers), f"{e.params_fused:,}", f"{e.gflops:.2f}", _weights_cell(e))
    console.print(table)
    return 0


def _weights_cell(row: ModelRow) -> str:
    """A model's weights: random init, or a trained model's source and whether its file is here yet."""
    from hwprof.workload.trained import TRAINED, cached_path

    trained = TRAINED.get(row.name)
    if trained is None:
        return row.weights
    here = "cached" if cached_path(trained).is_file() else "fetched from the registry on first use"
    return f"{row.weights}, {here}"


def cmd_advise(args: argparse.Namespace, console: Console) -> int:
    from hwprof.cli.advise import cmd_advise as run

    return run(args, console)


def cmd_sweep_job(args: argparse.Namespace, console: Console) -> int:
    from hwprof.cli.sweep_job import cmd_sweep_job as run

    return run(args, console)


def cmd_help(args: argparse.Namespace, console: Console) -> int:
    """`hwprof help [COMMAND|exit-codes]`: a command's help, the top-level help, or the exit statuses' table."""
    from hwprof.cli.exit_codes import exit_code_lines
    from hwprof.cli.help_text import help_width
    from hwprof.core.uservalue import close_to

    parser = build_parser()
    if args.topic == EXIT_TOPIC:
        print(exit_code_lines(help_width()))
        return EXIT_OK
    if args.topic is None:
        parser.print_help()
        return EXIT_OK
    commands = [c for c in COMMANDS if c != "help"]
    if args.topic not in commands:
        raise ValueError(
            f"help: no command or topic {args.topic!r}{close_to(args.topic, [*commands, EXIT_TOPIC])}; "
            f"topics: {EXIT_TOPIC}; commands: {', '.join(commands)}"
        )
    command_parser(parser, args.topic).print_help()
    return EXIT_OK


EXIT_TOPIC = "exit-codes"


def cmd_gpu_import(args: argparse.Namespace, console: Console) -> int:
    from hwprof.cli.gpu_import import run_gpu_import

    return run_gpu_import(args, console)


def cmd_attach(args: argparse.Namespace, console: Console) -> int:
    from hwprof.cli.attach import cmd_attach as attach

    return attach(args, console)


COMMANDS = {
    "collect": cmd_collect,
    "attach": cmd_attach,
    "report": cmd_report,
    "trace": cmd_trace,
    "compare": cmd_compare,
    "sweep": cmd_sweep,
    "sweep-job": cmd_sweep_job,
    "doctor": cmd_doctor,
    "models": cmd_models,
    "gpu-import": cmd_gpu_import,
    "advise": cmd_advise,
    "runs": cmd_runs,
    "track": cmd_track,
    "help": cmd_help,
}


ENV_COMMANDS = frozenset({"collect", "attach", "advise", "sweep", "sweep-job", "doctor"})
"""The commands that probe or run collectors: the HWPROF_* overrides they read are checked before they start."""


def parse_command(words: list[str], parser: argparse.ArgumentParser | None = None) -> argparse.Namespace:
    """A command line's words (after `hwprof`) parsed; `collect [options] -- PROGRAM...` keeps the program
    aside. `parser`: build_parser's, unless the caller wants one that raises (hwprof.api)."""
    options, program = split_program(words)
    parser = parser or build_parser()
    args = parser.parse_args(joined_negative_percents(options))
    args.config_file = None
    if getattr(args, "config", None) is not None:
        args, program = _with_config_file(parser, args, options, program)
    args.argv = words
    args.program = program
    return args


def _with_config_file(
    parser: argparse.ArgumentParser, args: argparse.Namespace, options: list[str], program: list[str] | None
) -> tuple[argparse.Namespace, list[str] | None]:
    """The command line parsed again over the options of its --config file (hwprof.cli.config_file)."""
    from hwprof.cli.config_file import WORDS, file_defaults, read_config

    config = read_config(args.config)
    command = command_parser(parser, args.command)
    defaults = file_defaults(config, command, args.command)
    words = defaults.pop(WORDS.get(args.command, ""), None)
    command.set_defaults(**defaults)
    again = parser.parse_args(joined_negative_percents(options))
    if args.command == "sweep" and words is not None and not again.collect_args:
        again.collect_args = words
    if args.command == "collect" and program is None and words is not None:
        program = words
    again.config_file = config
    return again, program


def command_stop(args: argparse.Namespace) -> StopSignals:
    """SIGINT, SIGTERM and SIGHUP end every command the same way (hwprof.session.stopping): a collect or a sweep
    forwards the first to its child and finishes what was kept; the exit status is 128 + the signal. The caller
    installs it inside the `try` that takes its Interrupted (installed before it, a signal between the two
    raised past every handler: a traceback, `hwprof trace` signalled at 0.3 s on a fresh clone) and uninstalls
    it."""
    stop = StopSignals(forward=None if args.command == "sweep" else signal.SIGTERM)
    args.stop = stop
    return stop


def run_command(args: argparse.Namespace, console: Console) -> int:
    """The parsed command, with the HWPROF_* overrides checked first where it probes or runs collectors."""
    from hwprof.core.envvars import environment_warning

    warning = environment_warning(args.command in ENV_COMMANDS)
    if warning is not None:
        print(warning, file=sys.stderr)
    check_tracking(args)
    return COMMANDS[args.command](args, console)


def main(argv: list[str] | None = None) -> int:
    """The command's exit status (hwprof.cli.exit_codes). Its report on standard output, its errors on standard
    error (hwprof.cli.streams); a standard output whose reader went away ends it quietly with 0. argparse's
    --help, --version and usage errors leave as SystemExit, their output flushed here."""
    try:
        code = _parse_and_run(list(sys.argv[1:] if argv is None else argv))
    except OutputClosed:
        silence_stdout()
        return EXIT_OK
    except BrokenPipeError:  # a write outside the command's own handling (--version's)
        if not stdout_reader_gone():
            raise
        silence_stdout()
        return EXIT_OK
    except SystemExit:
        flush_stdout()
        raise
    flush_stdout()
    return code


def _parse_and_run(words: list[str]) -> int:
    from hwprof.core.atomic import DiskFullError, FolderGoneError
    from hwprof.core.uservalue import exception_line
    from hwprof.session.plan import CollectError

    errors = ErrorConsole()

    def error(exc: BaseException) -> None:
        errors.print(f"[red]hwprof: error:[/] {escape(exception_line(exc))}", highlight=False, soft_wrap=True)

    def interrupted() -> int:
        errors.print(f"[red]interrupted[/] ({stop.name or 'SIGINT'})", highlight=False)
        return stop.exit_code if stop.requested else EXIT_INTERRUPTED

    try:
        args = parse_command(words)
    except ValueError as exc:  # a --config file that cannot be used (argparse's own errors exit 2 themselves)
        error(exc)
        return EXIT_USAGE
    console = CommandConsole(errors)
    stop = command_stop(args)

    try:
        stop.install()
        return run_command(args, console)
    except KeyboardInterrupt:
        return interrupted()
    except (DiskFullError, FolderGoneError) as exc:  # not a bad input: the run or its files could not be written
        error(exc)
        return EXIT_FAILED
    except (ValueError, OSError, CollectError) as exc:
        if isinstance(exc, BrokenPipeError) and stdout_reader_gone():
            raise OutputClosed from None  # a print() or sys.stdout.write into the closed pipe
        if stop.requested:  # what the stop cut, in a library's words (matplotlib's C++: "Invalid bounding box")
            errors.print(f"[red]interrupted[/] ({stop.name})", highlight=False)
            return stop.exit_code
        error(exc)
        return EXIT_USAGE
    except Exception as exc:  # after CollectError (a RuntimeError): only an interrupt it wraps (RuntimeError,
        if not wraps_interrupt(exc):  # ImportError: "initialization failed" of a C extension imported lazily)
            raise
        return interrupted()
    finally:
        stop.ending = True  # before any call: a stop delivered at uninstall()'s entry is noted, not raised
        stop.uninstall()


def wraps_interrupt(exc: BaseException) -> bool:
    """Whether a stop signal's KeyboardInterrupt is this exception's cause: Python 3.11 wraps one raised while a
    class is made (a dataclass's field, imported lazily by the command) in "RuntimeError: Error calling
    __set_name__", and one raised while a C extension initialises (matplotlib's _image, imported by the
    report's first plot) in "ImportError: initialization failed"; both reached the user as a traceback
    (tests/test_early_signals.py, signals at 0.35 and 0.5 s)."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


if __name__ == "__main__":
    sys.exit(main())
