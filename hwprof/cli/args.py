"""hwprof's command line: the parser of every command (hwprof.cli.collect turns collect's options into the library's
CollectRequest)."""

from __future__ import annotations

import argparse
from pathlib import Path

from hwprof.api.requests import csv_list
from hwprof.core.config import COUNTER_THREADS, RunConfig, default_threads
from hwprof.core.runtime_names import PRECISIONS, RUNTIMES, supported_text

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def add_collect_args(p: argparse.ArgumentParser) -> None:
    d = RunConfig()
    p.add_argument("--model", default=d.model, help="model name (see `hwprof models`)")
    p.add_argument(
        "--runtime", choices=RUNTIMES, default=d.runtime, help="what runs the forward (the model is exported to ONNX)"
    )
    p.add_argument("--precision", choices=PRECISIONS, default=d.precision, help=f"precision ({supported_text()})")
    p.add_argument("--device", default=d.device, help="cpu, or cuda[:N] (torch runtime on an NVIDIA GPU)")
    p.add_argument("--channels-last", action="store_true", help="model and input in channels_last (NHWC) layout")
    p.add_argument("--weights", help="checkpoint: ultralytics .pt, a plain state dict, or an official YOLOv7 release")
    p.add_argument(
        "--images",
        "--source",
        dest="images",
        metavar="PATH",
        help="a folder of images, one image, or a video file read frame by frame (default: bus.jpg and zidane.jpg "
        "from the ultralytics wheel)",
    )
    p.add_argument(
        "--annotate",
        metavar="OUT",
        help="write each frame with its boxes drawn: a video file (.mp4, .avi, ...) for a video input, a folder of "
        "images otherwise; adds the annotate and encode stages",
    )
    p.add_argument("--imgsz", type=int, default=d.imgsz, help="letterbox size (multiple of 32)")
    p.add_argument("--rect", action="store_true", help="pad only to a stride multiple (batch 1), as detect.py does")
    p.add_argument("--batch", type=int, default=d.batch)
    p.add_argument("--threads", type=int, default=default_threads(), help="torch intra-op threads")
    p.add_argument("--warmup", type=int, default=d.warmup)
    p.add_argument("--iters", type=int, default=d.iters, help="measured iterations per pass")
    p.add_argument("--depth", type=int, default=d.depth, choices=(1, 2), help="layer depth for markers")
    p.add_argument("--conf", type=float, default=d.conf)
    p.add_argument("--iou", type=float, default=d.iou)
    p.add_argument("--seed", type=int, default=d.seed, help="seed of the random init (no --weights)")
    add_collector_args(p, d)
    p.add_argument("--timeout", type=float, default=d.pass_timeout_s, help="seconds a pass may run")
    p.add_argument("--out", type=Path, help="run directory to create (default: results/<model>-<time>)")
    p.add_argument("--results", type=Path, default=Path("results"), help="where run directories go")
    p.add_argument("--no-report", action="store_true", help="do not print the summary at the end")
    add_program_args(p)


def add_collector_args(p: argparse.ArgumentParser, d: RunConfig) -> None:
    """Which collectors run, and their settings (events, counters, samplers' rates)."""
    p.add_argument("--only", type=csv_list, default=[], help="run only these collectors (comma list)")
    p.add_argument("--skip", type=csv_list, default=[], help="do not run these collectors (comma list)")
    p.add_argument("--events", type=csv_list, default=[], help="perf events (comma list; default: a standard set)")
    p.add_argument(
        "--counters",
        choices=("perf", "papi", "callgrind", "ncu"),
        default=d.counters,
        help="counter backend (callgrind: simulated, its own pass; ncu: Nsight Compute per layer, --device cuda)",
    )
    p.add_argument(
        "--counter-reads",
        choices=("rotate", "every"),
        default=d.counter_reads,
        help="per-layer counters: read each layer in a planned share of the iterations (rotate), or every layer "
        "in every iteration (every)",
    )
    p.add_argument(
        "--counter-threads",
        choices=COUNTER_THREADS,
        default=d.counter_threads,
        help="threads the per-layer counters count: every thread of the pass (all), the model's thread alone "
        "(model: no read interrupts another CPU), or auto (model on a GPU run, all on the CPU)",
    )
    p.add_argument("--interval-ms", type=float, default=d.interval_ms, help="sampler interval")
    p.add_argument("--pyspy-rate", type=int, default=d.pyspy_rate, help="py-spy samples per second")
    p.add_argument(
        "--pyspy-native", action="store_true", help="py-spy unwinds native stacks (pauses every thread per sample)"
    )
    p.add_argument(
        "--perf-rate", type=int, default=d.perf_rate, help="perf samples/s per thread in the kernels pass (0: auto)"
    )
    p.add_argument("--scalene-memory", action="store_true", help="Scalene also profiles memory")
    p.add_argument("--profiler-stack", action="store_true", help="torch.profiler records Python stacks")


def add_program_args(p: argparse.ArgumentParser) -> None:
    """`collect [options] -- python SCRIPT ARGS`: the user's own program instead of the built-in pipeline."""
    p.add_argument(
        "--program-model",
        metavar="NAME",
        help="after -- PROGRAM: the module to measure, as the program names it (e.g. detector.model); default: the "
        "outermost torch module the program calls repeatedly",
    )
    p.add_argument(
        "--program-end",
        choices=("stop", "run"),
        default="stop",
        help="after the measured calls: stop the program cleanly (default: every pass runs it again, so a long "
        "program would repeat its unmeasured rest in each) or let it run to its end",
    )
    p.add_argument(
        "--stage",
        action="append",
        default=[],
        metavar="NAME=module:function",
        help="after -- PROGRAM: time this function of the program as a stage (repeatable)",
    )


def split_program(words: list[str]) -> tuple[list[str], list[str] | None]:
    """`collect [options] -- PROGRAM...`: the options, and the program's command (None without `--`)."""
    if not words or words[0] != "collect" or "--" not in words:
        return words, None
    at = words.index("--")
    return words[:at], words[at + 1 :]


def add_cluster_args(p: argparse.ArgumentParser) -> None:
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
    sweep.add_argument("--models", type=csv_list, default=[])
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
    sweep.add_argument("--batch", type=lambda v: [int(x) for x in csv_list(v)], default=[1])
    sweep.add_argument("--device", default="cpu", help="cpu, or cuda[:N] for every point")
    sweep.add_argument("--imgsz", type=int, default=640)
    sweep.add_argument("--iters", type=int, default=5)
    sweep.add_argument("--warmup", type=int, default=1)
    sweep.add_argument("--timeout", type=float, default=None, help="seconds per point")
    sweep.add_argument("--out", type=Path, default=Path("results") / "sweep", help="where the points' runs go")
    sweep.add_argument(
        "--advise",
        action="store_true",
        help="every point's collect runs --advise; the table gives each point's best change, and a summary "
        "which change wins per kind of machine",
    )
    add_cluster_args(sweep)
    sweep.add_argument(
        "collect_args",
        nargs="*",
        help="after --: more `collect` options for every point (default collectors: --only timing,flops,rapl)",
    )


def add_doctor_args(doctor: argparse.ArgumentParser) -> None:
    """`hwprof doctor`: the counter backend and device to check, and the peak measurement."""
    doctor.add_argument("--counters", choices=("perf", "papi", "ncu"), default="perf")
    doctor.add_argument("--device", default="cpu", help="cpu, or cuda[:N]: what the GPU collectors could do there")
    doctor.add_argument("--peaks", action="store_true", help="measure (or show the cached) peak GFLOP/s and GB/s")
    doctor.add_argument("--force", action="store_true", help="with --peaks: measure again")
    doctor.add_argument("--threads", type=int, default=default_threads(), help="with --peaks: torch threads")


def build_parser(parser_class: type[argparse.ArgumentParser] = argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Every command's parser; `parser_class` for them all (the library's raises ValueError with argparse's
    line where the command line prints it and exits 2)."""
    parser = parser_class(prog="hwprof", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    from hwprof.cli.advise import add_advise_args

    collect = sub.add_parser("collect", help="run the pipeline under every available collector")
    add_collect_args(collect)
    collect.add_argument(
        "--advise", action="store_true", help="then run the changes the findings point to (as `hwprof advise`)"
    )
    add_advise_args(collect, prefix="advise-")
    advise = sub.add_parser(
        "advise", help="run the changes a run's findings point to, each paired against the run's configuration"
    )
    advise.add_argument("run_dir", type=Path)
    add_advise_args(advise)
    report = sub.add_parser("report", help="print the report of a run directory")
    report.add_argument("run_dir", type=Path)
    report.add_argument("--top", type=int, default=15, help="layers in the top-layers table")
    report.add_argument("--format", choices=("rich", "json", "csv", "markdown", "html"), default="rich")
    report.add_argument("--plots", action="store_true", help="redraw the PNG plots")
    trace = sub.add_parser("trace", help="(re)build RUN_DIR/trace.pftrace from the run directory")
    trace.add_argument("run_dir", type=Path)
    trace.add_argument("--out", type=Path, help="write the trace to this file instead of RUN_DIR/trace.pftrace")
    compare = sub.add_parser(
        "compare", help="runs side by side, with ratios to the first; with --fail-above, a performance gate"
    )
    from hwprof.cli.gate_args import add_compare_args

    add_compare_args(compare)
    sweep = sub.add_parser(
        "sweep", help="one collect per model x runtime x precision x threads x batch, then one table"
    )
    add_sweep_args(sweep)
    from hwprof.cli.sweep_job import add_sweep_job_args

    add_sweep_job_args(sub.add_parser("sweep-job", help="a sweep submitted with --submit: status, logs, stop, fetch"))
    doctor = sub.add_parser("doctor", help="what this host can measure, and the fix for what it cannot")
    add_doctor_args(doctor)
    models = sub.add_parser("models", help="the model names hwprof knows, with params and GFLOPs")
    models.add_argument("--imgsz", type=int, default=640)
    from hwprof.cli.gpu_import import add_gpu_import_args

    add_gpu_import_args(
        sub.add_parser("gpu-import", help="recorded GPU data (Kineto CUDA trace, ncu CSV, NVML) as tables")
    )
    return parser
