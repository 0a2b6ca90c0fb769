"""Every command's parser: `build_parser`, and the options of collect, sweep and doctor (the other commands'
options are in their own modules). What the help says besides the options is hwprof.cli.help_text."""

from __future__ import annotations

import argparse
from pathlib import Path

from hwprof.api.requests import csv_list, duration_s
from hwprof.cli import help_text
from hwprof.cli.exit_codes import EXIT_INTERRUPTED, EXIT_USAGE
from hwprof.cli.gate_args import OptionGroup
from hwprof.cli.track import add_track_option
from hwprof.cli.usage_errors import OneLineParser
from hwprof.cli.version import VersionAction
from hwprof.core.config import COUNTER_THREADS, RunConfig, default_threads
from hwprof.core.runtime_names import PRECISIONS, RUNTIMES, supported_text

__all__ = ["EXIT_INTERRUPTED", "EXIT_USAGE", "add_collect_args", "build_parser", "command_parser", "split_program"]


def add_collect_args(p: argparse.ArgumentParser) -> None:
    """collect's options in the groups its help shows (all but --advise and its options, which build_parser
    adds: a sweep's points take the rest)."""
    d = RunConfig()
    add_input_args(p.add_argument_group("input", "the images or video the pipeline reads"), d)
    add_model_args(p.add_argument_group("model and runtime", "what runs the forward, and how"), d)
    measure = p.add_argument_group("measurement", "how many iterations each pass measures, and for how long")
    warm = f"default: until warm, at most {d.warmup}, or {d.warmup} with --iters"
    measure.add_argument("--warmup", type=int, default=None, help=f"iterations run before each pass measures ({warm})")
    resolved = f"default: each pass stops once its figures are resolved, at most {d.iters} or what its collectors need"
    measure.add_argument("--iters", type=int, default=None, help=f"measured iterations per pass ({resolved})")
    budget = "time the passes share (90s, 2m; default none): a pass out of its share says what it did not resolve"
    measure.add_argument("--budget", type=duration_s, default=d.budget_s, metavar="TIME", help=budget)
    measure.add_argument("--timeout", type=float, default=d.pass_timeout_s, help="seconds a pass may run")
    add_collector_args(p.add_argument_group("passes and collectors", "which collectors run, and their rates"), d)
    add_counter_args(p.add_argument_group("counters", "the hardware counters read per layer"), d)
    add_program_args(
        p.add_argument_group(
            "your own program", "`collect [options] -- python SCRIPT ARGS`: your program instead of the built-in one"
        )
    )
    out = p.add_argument_group("output", "where the run directory goes")
    out.add_argument("--out", type=Path, help="run directory to create (default: results/<model>-<time>)")
    out.add_argument("--results", type=Path, default=Path("results"), help="where run directories go")
    out.add_argument("--no-report", action="store_true", help="do not print the report at the end (it is written)")
    add_track_option(out, "the run")
    add_config_args(p.add_argument_group("config file", "the options in a TOML or YAML file"), dump=True)


def add_config_args(g: OptionGroup, dump: bool = False) -> None:
    """--config FILE (hwprof.cli.config_file), and collect's --dump-config."""
    g.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="read the options from a .toml or .yaml file (each key an option's long name; an option given on the "
        "command line overrides it)",
    )
    if dump:
        g.add_argument(
            "--dump-config", action="store_true", help="print the TOML file that gives these options, and exit"
        )


def add_input_args(g: OptionGroup, d: RunConfig) -> None:
    """The images or video, how they are letterboxed and batched, and the annotated output."""
    g.add_argument(
        "--images",
        "--source",
        dest="images",
        metavar="PATH",
        help="a folder of images, one image, or a video file read frame by frame (default: bus.jpg and zidane.jpg "
        "from the ultralytics wheel)",
    )
    g.add_argument("--imgsz", type=int, default=d.imgsz, help="letterbox size (multiple of 32)")
    g.add_argument("--rect", action="store_true", help="pad only to a stride multiple (batch 1), as detect.py does")
    g.add_argument("--batch", type=int, default=d.batch, help="images per forward")
    g.add_argument(
        "--annotate",
        metavar="OUT",
        help="write each frame with its boxes drawn: a video file (.mp4, .avi, ...) for a video input, a folder of "
        "images otherwise; adds the annotate and encode stages",
    )


def add_model_args(g: OptionGroup, d: RunConfig) -> None:
    """The model, its weights, the runtime, precision and device that run it, and the detection thresholds."""
    g.add_argument("--model", default=d.model, help="model name (`hwprof models` lists them)")
    g.add_argument("--weights", help="checkpoint: ultralytics .pt, a plain state dict, or an official YOLOv7 release")
    g.add_argument(
        "--runtime", choices=RUNTIMES, default=d.runtime, help="what runs the forward (the model is exported to ONNX)"
    )
    g.add_argument("--precision", choices=PRECISIONS, default=d.precision, help=f"precision ({supported_text()})")
    g.add_argument("--device", default=d.device, help="cpu, or cuda[:N] (torch runtime on an NVIDIA GPU)")
    g.add_argument("--channels-last", action="store_true", help="model and input in channels_last (NHWC) layout")
    g.add_argument("--threads", type=int, default=default_threads(), help="torch intra-op threads")
    g.add_argument("--seed", type=int, default=d.seed, help="seed of the random weights (without --weights)")
    g.add_argument("--conf", type=float, default=d.conf, help="confidence threshold of the detections")
    g.add_argument("--iou", type=float, default=d.iou, help="IoU threshold of non-maximum suppression")
    g.add_argument(
        "--depth",
        type=int,
        default=d.depth,
        choices=(1, 2),
        help="layer depth timed: the model's layers (1) or their children too (2)",
    )


def add_collector_args(g: OptionGroup, d: RunConfig) -> None:
    """Which collectors run, and the samplers' rates."""
    names = help_text.COLLECTORS
    g.add_argument("--only", type=csv_list, default=[], help=f"run only these collectors (comma list of {names})")
    g.add_argument("--skip", type=csv_list, default=[], help="do not run these collectors (comma list, as --only)")
    g.add_argument("--interval-ms", type=float, default=d.interval_ms, help="system sampler interval (ms)")
    g.add_argument("--pyspy-rate", type=int, default=d.pyspy_rate, help="py-spy samples per second")
    g.add_argument(
        "--pyspy-native", action="store_true", help="py-spy unwinds native stacks (pauses every thread per sample)"
    )
    g.add_argument(
        "--perf-rate", type=int, default=d.perf_rate, help="perf samples/s per thread in the kernels pass (0: auto)"
    )
    g.add_argument("--scalene-memory", action="store_true", help="Scalene also profiles memory")
    g.add_argument("--profiler-stack", action="store_true", help="torch.profiler records Python stacks")


def add_counter_args(g: OptionGroup, d: RunConfig) -> None:
    """The hardware counters: which events, which backend reads them, and how per-layer reads are spread."""
    g.add_argument("--events", type=csv_list, default=[], help="perf events (comma list; default: a standard set)")
    g.add_argument(
        "--counters",
        choices=("perf", "papi", "callgrind", "ncu"),
        default=d.counters,
        help="counter backend (callgrind: simulated, its own pass; ncu: Nsight Compute per layer, --device cuda)",
    )
    g.add_argument(
        "--counter-reads",
        choices=("rotate", "every"),
        default=d.counter_reads,
        help="per-layer counters: read each layer in a planned share of the iterations (rotate), or every layer "
        "in every iteration (every)",
    )
    g.add_argument(
        "--counter-threads",
        choices=COUNTER_THREADS,
        default=d.counter_threads,
        help="threads the per-layer counters count: every thread of the pass (all), the model's thread alone "
        "(model: no read interrupts another CPU), or auto (model on a GPU run, all on the CPU)",
    )


def add_program_args(g: OptionGroup) -> None:
    """`collect [options] -- python SCRIPT ARGS`: the user's own program instead of the built-in pipeline."""
    g.add_argument(
        "--program-model",
        metavar="NAME",
        help="after -- PROGRAM: the module to measure, as the program names it (e.g. detector.model); default: the "
        "outermost torch module the program calls repeatedly",
    )
    g.add_argument(
        "--program-end",
        choices=("stop", "run"),
        default="stop",
        help="after the measured calls: stop the program cleanly (default: every pass runs it again, so a long "
        "program would repeat its unmeasured rest in each) or let it run to its end",
    )
    g.add_argument(
        "--stage",
        action="append",
        default=[],
        metavar="NAME=module:function",
        help="after -- PROGRAM: time this function of the program as a stage (repeatable)",
    )
    g.add_argument(
        "--program-stdin",
        metavar="FILE",
        help="after -- PROGRAM: the program's stdin, read anew from the file's start by every pass (default: "
        "/dev/null, since every pass runs the program again and a stream would feed only the first)",
    )


def split_program(words: list[str]) -> tuple[list[str], list[str] | None]:
    """`collect [options] -- PROGRAM...`: the options, and the program's command (None without `--`)."""
    if not words or words[0] != "collect" or "--" not in words:
        return words, None
    at = words.index("--")
    return words[:at], words[at + 1 :]


def add_cluster_args(p: OptionGroup) -> None:
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run each point as a task on this Ray cluster (HOST:PORT or auto); nodes declare --resources "
        "'{\"hwprof\": 1}'",
    )
    p.add_argument("--per-host", action="store_true", help="with --ray: every point once on each kind of machine")
    p.add_argument(
        "--hosts", type=csv_list, default=[], help="with --ray: only these kinds (slug or part of CPU model)"
    )
    p.add_argument(
        "--resume",
        type=Path,
        metavar="DIR",
        help="run the points of the sweep in DIR that are not complete, with its recorded options (and cluster)",
    )
    p.add_argument("--local", action="store_true", help="with --resume: run here even if the sweep used Ray")
    p.add_argument(
        "--submit",
        action="store_true",
        help="with --ray: submit the sweep as a Ray Job and return (follow it with `hwprof sweep-job ... DIR`)",
    )


def add_sweep_args(sweep: argparse.ArgumentParser) -> None:
    """`hwprof sweep`: the grid's dimensions, each point's collect settings, the cluster and the points' own
    collect options after --."""
    sweep.add_argument("--models", type=csv_list, default=[], help="comma list of model names (`hwprof models`)")
    sweep.add_argument(
        "--format",
        choices=("rich", "markdown", "html"),
        default="rich",
        help="the table printed at the end: terminal (rich), markdown, or html (only the path of OUT/sweep.html, "
        "which every sweep writes)",
    )
    sweep.add_argument(
        "--runtimes", type=csv_list, default=["torch"], help=f"comma list of {', '.join(RUNTIMES)} (default torch)"
    )
    sweep.add_argument(
        "--precisions",
        type=csv_list,
        default=["fp32"],
        help=f"comma list of {', '.join(PRECISIONS)} (default fp32); pairs a runtime does not run are skipped "
        f"({supported_text()})",
    )
    sweep.add_argument(
        "--threads",
        type=lambda v: [int(x) for x in csv_list(v)],
        default=[],
        help="comma list of torch thread counts (default: this machine's; with --ray, each node's own)",
    )
    sweep.add_argument(
        "--batch", type=lambda v: [int(x) for x in csv_list(v)], default=[1], help="comma list of batch sizes"
    )
    sweep.add_argument("--device", default="cpu", help="cpu, or cuda[:N] for every point")
    sweep.add_argument("--imgsz", type=int, default=640, help="every point's letterbox size")
    sweep.add_argument("--iters", type=int, default=5, help="every point's measured iterations per pass")
    sweep.add_argument("--warmup", type=int, default=1, help="every point's warm-up iterations")
    sweep.add_argument("--timeout", type=float, default=None, help="seconds per point")
    sweep.add_argument("--out", type=Path, default=Path("results") / "sweep", help="where the points' runs go")
    sweep.add_argument(
        "--advise",
        action="store_true",
        help="every point's collect runs --advise; the table gives each point's best change, and a summary "
        "which change wins per kind of machine",
    )
    add_cluster_args(sweep.add_argument_group("Ray cluster", "run the points on a Ray cluster, or resume a sweep"))
    add_config_args(sweep.add_argument_group("config file", "the options in a TOML or YAML file"))
    add_track_option(sweep, "the sweep (a parent run, a child run per point)")
    sweep.add_argument(
        "collect_args",
        nargs="*",
        help="after --: more `collect` options for every point (default collectors: --only timing,flops,rapl)",
    )


def command_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The parser of one command (`collect`) inside build_parser's."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found: argparse.ArgumentParser = sub.choices[command]
    return found


def build_parser(parser_class: type[argparse.ArgumentParser] = OneLineParser) -> argparse.ArgumentParser:
    """Every command's parser; `parser_class` for them all: the command line's says a usage mistake in one line
    (hwprof.cli.usage_errors), the library's raises ValueError with argparse's line."""
    h = help_text
    parser = parser_class(
        prog="hwprof", description=h.HWPROF, epilog=h.hwprof_epilog(), formatter_class=h.HelpFormatter
    )
    parser.add_argument("--version", action=VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, title="commands", metavar="COMMAND")
    _add_measuring_commands(sub)
    _add_reading_commands(sub)
    _add_many_runs_commands(sub)
    _add_machine_commands(sub)
    return parser


def _add_measuring_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """collect (with --advise and its options) and advise: the commands that run the model."""
    from hwprof.cli.advise import add_advise_args

    h = help_text
    collect = sub.add_parser(
        "collect",
        usage="hwprof collect [options] [-- PROGRAM ARGS]",  # argparse's own is 21 lines of [--only ONLY] ...
        **h.described("profile a model or your program: writes a run directory", h.COLLECT, h.COLLECT_EXAMPLES),
    )
    add_collect_args(collect)
    advice = collect.add_argument_group("advice", "with --advise: the changes the findings point to, tried after")
    advice.add_argument(
        "--advise", action="store_true", help="then run the changes the findings point to (as `hwprof advise`)"
    )
    add_advise_args(advice, prefix="advise-")
    from hwprof.cli.attach import add_attach_command

    add_attach_command(sub)
    advise = sub.add_parser(
        "advise",
        **h.described("try the changes a run's findings point to: writes advice.json", h.ADVISE, h.ADVISE_EXAMPLES),
    )
    _add_run_dir_arg(advise)
    add_advise_args(advise)
    add_track_option(advise, "the run and its candidates (child runs)")


def _add_reading_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """report, trace and compare: the commands that read runs already collected."""
    from hwprof.cli.gate_args import add_compare_args

    h = help_text
    report = sub.add_parser("report", **h.described("print a run's report", h.REPORT, h.REPORT_EXAMPLES))
    _add_run_dir_arg(report)
    report.add_argument("--top", type=int, default=15, help="layers in the top-layers table")
    report.add_argument(
        "--format",
        choices=("rich", "json", "csv", "markdown", "html"),
        default="rich",
        help="terminal tables (rich), or the report as JSON, CSV, markdown or HTML on standard output",
    )
    report.add_argument("--plots", action="store_true", help="redraw the PNG plots")
    trace = sub.add_parser("trace", **h.described("rebuild a run's Perfetto trace", h.TRACE, h.TRACE_EXAMPLES))
    _add_run_dir_arg(trace)
    trace.add_argument("--out", type=Path, help="write the trace to this file instead of RUN/trace.pftrace")
    compare = sub.add_parser(
        "compare", **h.described("runs side by side; with --fail-above, a CI gate", h.COMPARE, h.COMPARE_EXAMPLES)
    )
    add_compare_args(compare)


def _add_many_runs_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """sweep, sweep-job, runs and track: the commands of many runs (a grid, those kept here, an MLflow store)."""
    from hwprof.cli.runs import add_runs_args
    from hwprof.cli.sweep_job import add_sweep_job_args
    from hwprof.cli.track import add_track_args

    h = help_text
    sweep = sub.add_parser(
        "sweep",
        usage="hwprof sweep [options] [-- COLLECT OPTIONS]",
        **h.described("one collect per point of a grid, then one table", h.SWEEP, h.SWEEP_EXAMPLES),
    )
    add_sweep_args(sweep)
    add_sweep_job_args(
        sub.add_parser(
            "sweep-job",
            **h.described(
                "follow a sweep submitted to Ray: status, logs, stop, fetch", h.SWEEP_JOB, h.SWEEP_JOB_EXAMPLES
            ),
        )
    )
    add_runs_args(sub.add_parser("runs", **h.described("the runs kept here, one table", h.RUNS, h.RUNS_EXAMPLES)))
    add_track_args(sub.add_parser("track", **h.described("log runs to MLflow", h.TRACK, h.TRACK_EXAMPLES)))


def _add_machine_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """doctor, models and gpu-import: what this machine can measure, the models it can run, and GPU data made
    elsewhere."""
    from hwprof.cli.doctor import add_doctor_args
    from hwprof.cli.gpu_import import add_gpu_import_args

    h = help_text
    doctor = sub.add_parser(
        "doctor",
        **h.described("what this machine can measure, and the fix for what it cannot", h.DOCTOR, h.DOCTOR_EXAMPLES),
    )
    add_doctor_args(doctor)
    models = sub.add_parser(
        "models",
        **h.described("the models `collect --model` takes, with params and GFLOPs", h.MODELS, h.MODELS_EXAMPLES),
    )
    models.add_argument("--imgsz", type=int, default=640, help="image size the GFLOPs are counted at")
    add_gpu_import_args(
        sub.add_parser(
            "gpu-import",
            **h.described("GPU data recorded elsewhere as tables or a run", h.GPU_IMPORT, h.GPU_IMPORT_EXAMPLES),
        )
    )
    helper = sub.add_parser("help", **h.described("a command's help, or a topic: exit-codes", h.HELP, h.HELP_EXAMPLES))
    helper.add_argument("topic", nargs="?", metavar="COMMAND|TOPIC", help="a command, or exit-codes")


def _add_run_dir_arg(p: argparse.ArgumentParser) -> None:
    """The RUN argument of advise, report and trace."""
    p.add_argument("run_dir", type=Path, metavar="RUN", help="a run directory of `hwprof collect`")
