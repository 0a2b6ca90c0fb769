"""hwprof's command line: collect, report, trace, compare, sweep, doctor, models."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from hwprof.config import RunConfig, default_threads
from hwprof.workload.runtime_names import PRECISIONS, RUNTIMES, supported_text

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _add_collect_args(p: argparse.ArgumentParser) -> None:
    d = RunConfig()
    p.add_argument("--model", default=d.model, help="model name (see `hwprof models`)")
    p.add_argument(
        "--runtime", choices=RUNTIMES, default=d.runtime, help="what runs the forward (the model is exported to ONNX)"
    )
    p.add_argument("--precision", choices=PRECISIONS, default=d.precision, help=f"precision ({supported_text()})")
    p.add_argument("--device", default=d.device, help="cpu, or cuda[:N] (torch runtime on an NVIDIA GPU)")
    p.add_argument("--channels-last", action="store_true", help="model and input in channels_last (NHWC) layout")
    p.add_argument("--weights", help="checkpoint: ultralytics .pt, a plain state dict, or an official YOLOv7 release")
    p.add_argument("--images", help="folder of images (default: bus.jpg and zidane.jpg from the ultralytics wheel)")
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
    p.add_argument("--only", type=_csv, default=[], help="run only these collectors (comma list)")
    p.add_argument("--skip", type=_csv, default=[], help="do not run these collectors (comma list)")
    p.add_argument("--events", type=_csv, default=[], help="perf events (comma list; default: a standard set)")
    p.add_argument(
        "--counters",
        choices=("perf", "papi", "callgrind", "ncu"),
        default=d.counters,
        help="counter backend (callgrind: simulated, its own pass; ncu: Nsight Compute per layer, --device cuda)",
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
    p.add_argument("--timeout", type=float, default=d.pass_timeout_s, help="seconds a pass may run")
    p.add_argument("--out", type=Path, help="run directory to create (default: results/<model>-<time>)")
    p.add_argument("--results", type=Path, default=Path("results"), help="where run directories go")
    p.add_argument("--no-report", action="store_true", help="do not print the summary at the end")


def _config_from(args: argparse.Namespace) -> RunConfig:
    config = RunConfig(
        model=args.model,
        runtime=args.runtime,
        precision=args.precision,
        device=args.device,
        channels_last=args.channels_last,
        weights=args.weights,
        images=args.images,
        imgsz=args.imgsz,
        batch=args.batch,
        threads=args.threads,
        warmup=args.warmup,
        iters=args.iters,
        depth=args.depth,
        conf=args.conf,
        iou=args.iou,
        seed=args.seed,
        only=args.only,
        skip=args.skip,
        events=args.events,
        counters=args.counters,
        interval_ms=args.interval_ms,
        pyspy_rate=args.pyspy_rate,
        pyspy_native=args.pyspy_native,
        perf_rate=args.perf_rate,
        scalene_memory=args.scalene_memory,
        profiler_stack=args.profiler_stack,
        pass_timeout_s=args.timeout,
        extra={"rect": args.rect},
    )
    config.validate()
    return config


class _PassProgress:
    """Rich progress bars fed by the workers' JSON progress lines."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.tasks: dict[str, Any] = {}

    def __call__(self, pass_name: str, event: dict[str, Any]) -> None:
        if pass_name not in self.tasks:
            self.tasks[pass_name] = self.progress.add_task(f"pass {pass_name}", total=None)
        task = self.tasks[pass_name]
        if "total" in event and "done" in event:
            phase = event.get("phase", "")
            self.progress.update(
                task,
                total=event["total"] if phase != "build" else None,
                completed=event["done"] if phase != "build" else 0,
                description=f"pass {pass_name}: {phase}",
            )


def cmd_collect(args: argparse.Namespace, console: Console) -> int:
    from hwprof.registry import all_collectors, check_names
    from hwprof.rundata import RunData
    from hwprof.session import CollectError, Session, claim_out_dir, new_run_dir, plan_passes
    from hwprof.workload.images import discover
    from hwprof.workload.zoo import family_of

    config = _config_from(args)
    if config.device != "cpu":
        from hwprof.gpu_device import require_cuda

        require_cuda(config.device)
    config.resolve_paths()
    family_of(config.model)
    check_names(config.only + config.skip)
    for cls in all_collectors():
        if cls.wanted(config):
            cls.check_options(config)
    if config.weights and not Path(config.weights).is_file():
        raise ValueError(f"weights file {config.weights} does not exist")
    images = discover(config.images)
    for path, reason in images.skipped:
        console.print(f"[yellow]warning:[/] skipping {path}: {reason}")
    plan = plan_passes(config)
    if not plan.passes:
        raise ValueError("no collector can run on this host with these options (see `hwprof doctor`)")
    run_dir = claim_out_dir(args.out) if args.out else new_run_dir(args.results, config.model)
    console.print(
        f"collecting into [bold]{run_dir}[/]: passes "
        + ", ".join(f"{p.name} ({', '.join(c.name for c in p.collectors)})" for p in plan.passes)
    )
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        session = Session(config, run_dir, images, _PassProgress(progress))
        try:
            session.collect(plan, sys.argv)
        except KeyboardInterrupt:
            progress.stop()
            console.print(f"[red]interrupted[/]: partial results kept in {run_dir}")
            return EXIT_INTERRUPTED
        except CollectError as exc:
            progress.stop()
            console.print(f"[red]hwprof: error:[/] {exc} (partial results in {run_dir})")
            return EXIT_USAGE
    data = RunData.load(run_dir)
    from hwprof.render.report import render_report, write_artifacts

    try:
        if args.no_report:
            from hwprof.analysis.run_analysis import analyse

            write_artifacts(analyse(data), data, console)
        else:
            render_report(data, console)
        _write_trace(run_dir, console)
    except Exception as exc:  # the collection is on disk; only its rendering failed (e.g. Ctrl-C inside an import)
        console.print(
            f"[red]hwprof: error:[/] the report could not be written ({type(exc).__name__}: {exc}); the run is kept "
            f"in {run_dir}: `hwprof report {run_dir}` and `hwprof trace {run_dir}` build it again",
            highlight=False,
        )
        return 1
    console.print(f"run directory: {run_dir}")
    for line in lingering_lines(data.run):
        console.print(f"[yellow]warning:[/] {line}", highlight=False)
    problems = run_problems(data.run)
    for problem in problems:
        console.print(f"[red]hwprof: error:[/] {problem}", highlight=False)
    return 1 if problems else 0


def lingering_lines(run: dict[str, Any]) -> list[str]:
    """One line per process a pass's worker left behind, which the session stopped."""
    how = {"exited": "it ended on its own", "survived": "it could not be stopped"}
    return [
        f"pass {name}: the worker left {x['name']} (pid {x['pid']}, state {x['state']}: "
        f"{' '.join(x['cmdline'])[:120]}) running; {how.get(x['stopped_by'], 'stopped by ' + x['stopped_by'])} "
        f"{x['lingered_s']:.1f} s after the worker exited"
        for name, p in run.get("passes", {}).items()
        for x in p.get("lingering", [])
    ]


def run_problems(run: dict[str, Any]) -> list[str]:
    """One line per pass that did not finish and per collector that failed (unavailable is not a failure)."""
    lines = [
        f"pass {name} {p['status']}: {p.get('error', '')}"
        for name, p in run.get("passes", {}).items()
        if p.get("status") != "ok"
    ]
    lines += [
        f"collector {name} failed: {c.get('reason', '')}"
        for name, c in run.get("collectors", {}).items()
        if c.get("status") == "failed"
    ]
    return lines


def _write_trace(run_dir: Path, console: Console) -> None:
    from hwprof.render.perfetto import build_trace

    try:
        stats = build_trace(run_dir)
    except Exception as exc:  # the trace is one view among several: the run stays usable without it
        console.print(f"[red]hwprof: error:[/] the Perfetto trace could not be built: {type(exc).__name__}: {exc}")
        return
    samples = (
        f"; its {stats.perf_samples} CPU samples are on each thread's Callstacks track (select a layer's range "
        "for their flamegraph)"
        if stats.perf_samples
        else ""
    )
    console.print(
        f"trace: {stats.path} ({stats.size_bytes / 1e6:.1f} MB, built in {stats.build_s:.1f} s): "
        f"open it at https://ui.perfetto.dev (Open trace file){samples}",
        highlight=False,
    )


def cmd_report(args: argparse.Namespace, console: Console) -> int:
    from hwprof.render.report import report

    report(args.run_dir, top=args.top, format=args.format, console=console, plots=True if args.plots else None)
    return 0


def cmd_trace(args: argparse.Namespace, console: Console) -> int:
    from hwprof.rundata import RunData

    RunData.load(args.run_dir)
    _write_trace(args.run_dir, console)
    return 0


def cmd_compare(args: argparse.Namespace, console: Console) -> int:
    from hwprof.render.compare import compare

    compare(args.run_dirs, console=console, top=args.top, format=args.format)
    return 0


def cmd_sweep(args: argparse.Namespace, console: Console) -> int:
    from hwprof.render.compare import sweep
    from hwprof.sweep import ProgressFn, SweepPlan, SweepResult, plan_from_file, run_sweep
    from hwprof.workload.zoo import family_of

    ray: dict[str, Any] | None = None
    if args.resume:
        if args.models:
            raise ValueError("--resume DIR runs the points of the sweep recorded in DIR: give no --models")
        plan, ray = plan_from_file(args.resume)
    elif not args.models:
        raise ValueError("sweep needs --models (or --resume DIR)")
    else:
        plan = SweepPlan(
            args.models,
            args.threads or [default_threads()],
            args.batch,
            args.out,
            imgsz=args.imgsz,
            iters=args.iters,
            warmup=args.warmup,
            extra_args=args.collect_args,
            timeout_s=args.timeout,
            runtimes=args.runtimes,
            precisions=args.precisions,
            device=args.device,
        )
    for model in plan.models:
        family_of(model)
    if plan.device != "cpu":
        from hwprof.gpu_device import require_cuda

        require_cuda(plan.device)
    runner: Callable[[SweepPlan, ProgressFn], SweepResult] = run_sweep
    if ray and args.local and ray.get("per_host"):
        raise ValueError("--local cannot resume a --per-host sweep: its points belong to kinds of cluster nodes")
    if args.ray or (ray and not args.local):
        from hwprof.sweep_ray import ray_runner

        runner = ray_runner(args, ray, plan)
    elif args.per_host or args.hosts:
        raise ValueError("--per-host and --hosts choose nodes of a Ray cluster: give --ray ADDRESS too")
    result = sweep(plan, console, runner)
    return 0 if all(r.status in ("complete", "reused") for r in result.rows) else 1


def cmd_doctor(args: argparse.Namespace, console: Console) -> int:
    from hwprof.registry import all_collectors
    from hwprof.render.status_block import StatusRow, status_renderable

    if args.device != "cpu":
        from hwprof.gpu_device import require_cuda

        require_cuda(args.device)
    if args.peaks and args.device != "cpu":
        from hwprof.gpu_peaks import load_or_measure

        gpu = load_or_measure(int(args.device.partition(":")[2] or 0), force=args.force)
        console.print_json(json.dumps(gpu))
    elif args.peaks:
        from hwprof.render.report import doctor_peaks

        doctor_peaks(args.threads, force=args.force, console=console)
    config = RunConfig(counters=args.counters, device=args.device)
    rows: list[StatusRow] = []
    for cls in all_collectors():
        try:
            cap = cls.probe(config)
        except Exception as exc:
            rows.append(StatusRow(cls.name, cls.pass_name, "[red]probe failed[/]", f"{type(exc).__name__}: {exc}"))
            continue
        status = "[green]available[/]" if cap.available else "[yellow]unavailable[/]"
        if cap.available and not cls.wanted(config):
            status = "[green]available[/] (off by default)"
        rows.append(StatusRow(cls.name, cls.pass_name, status, cap.reason, cap.fix))
        for names, reason, fix in _unavailable_parts(cap.details):
            rows.append(StatusRow("", "", f"[yellow]{len(names)} unavailable[/]", f"{', '.join(names)}: {reason}", fix))
    console.print(status_renderable("what this host can measure", rows, console.width))
    console.print(_runtimes_table())
    return 0


def _runtimes_table() -> Any:
    from rich.table import Table

    from hwprof.workload.runtime_probe import runtime_statuses

    table = Table(title="runtimes (collect --runtime R --precision P)", title_justify="left")
    for col in ("runtime", "version", "precisions", "note"):
        table.add_column(col, overflow="fold")
    for st in runtime_statuses():
        version = st.version or "[yellow]unavailable[/]"
        table.add_row(st.runtime, version, ", ".join(st.precisions), st.note)
    return table


def _unavailable_parts(details: dict[str, Any]) -> list[tuple[list[str], str, str]]:
    """A collector that works in part lists what it cannot do in details["unavailable"]: name -> {reason, fix}."""
    parts: dict[tuple[str, str], list[str]] = {}
    unavailable = details.get("unavailable")
    if isinstance(unavailable, dict):
        for name, why in unavailable.items():
            if isinstance(why, dict):
                parts.setdefault((str(why.get("reason", "")), str(why.get("fix", ""))), []).append(str(name))
    return [(names, reason, fix) for (reason, fix), names in parts.items()]


def cmd_models(args: argparse.Namespace, console: Console) -> int:
    from rich.table import Table

    from hwprof.workload.catalog import model_catalog

    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), console=console, transient=True
    ) as progress:
        task = progress.add_task("measuring models", total=None)

        def step(done: int, total: int, name: str) -> None:
            progress.update(task, completed=done, total=total, description=f"building {name}")

        entries = model_catalog(args.imgsz, step)
    table = Table(
        title=f"models (random init; params after fusing; FLOPs at {args.imgsz}x{args.imgsz})",
        title_justify="left",
    )
    for col in ("model", "family", "layers", "params", "GFLOPs"):
        table.add_column(col, justify="left" if col in ("model", "family") else "right")
    for e in entries:
        table.add_row(e["name"], e["family"], str(e["layers"]), f"{e['params_fused']:,}", f"{e['gflops']:.2f}")
    console.print(table)
    return 0


def cmd_gpu_import(args: argparse.Namespace, console: Console) -> int:
    from hwprof.gpu_cli import run_gpu_import

    return run_gpu_import(args, console)


def _add_cluster_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run each point as a task on this Ray cluster (HOST:PORT or auto); nodes declare --resources "
        "'{\"hwprof\": 1}'",
    )
    p.add_argument("--per-host", action="store_true", help="with --ray: every point once on each kind of machine")
    p.add_argument("--hosts", type=_csv, default=[], help="with --ray: only these kinds (slug or part of CPU model)")
    p.add_argument(
        "--resume",
        type=Path,
        metavar="DIR",
        help="run the points of the sweep in DIR that are not complete, with its recorded options (and cluster)",
    )
    p.add_argument("--local", action="store_true", help="with --resume: run here even if the sweep used Ray")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hwprof", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    collect = sub.add_parser("collect", help="run the pipeline under every available collector")
    _add_collect_args(collect)
    report = sub.add_parser("report", help="print the report of a run directory")
    report.add_argument("run_dir", type=Path)
    report.add_argument("--top", type=int, default=15, help="layers in the top-layers table")
    report.add_argument("--format", choices=("rich", "json", "csv", "markdown"), default="rich")
    report.add_argument("--plots", action="store_true", help="redraw the PNG plots")
    trace = sub.add_parser("trace", help="(re)build RUN_DIR/trace.pftrace from the run directory")
    trace.add_argument("run_dir", type=Path)
    compare = sub.add_parser("compare", help="runs side by side, with ratios to the first")
    compare.add_argument("run_dirs", type=Path, nargs="+")
    compare.add_argument("--top", type=int, default=15)
    compare.add_argument("--format", choices=("rich", "markdown", "json"), default="rich")
    sweep = sub.add_parser(
        "sweep", help="one collect per model x runtime x precision x threads x batch, then one table"
    )
    sweep.add_argument("--models", type=_csv, default=[])
    sweep.add_argument(
        "--runtimes", type=_csv, default=["torch"], help=f"comma list of {', '.join(RUNTIMES)} (default torch)"
    )
    sweep.add_argument(
        "--precisions",
        type=_csv,
        default=["fp32"],
        help=f"comma list of {', '.join(PRECISIONS)} (default fp32); pairs a runtime does not run are skipped "
        f"({supported_text()})",
    )
    sweep.add_argument("--threads", type=lambda v: [int(x) for x in _csv(v)], default=[])
    sweep.add_argument("--batch", type=lambda v: [int(x) for x in _csv(v)], default=[1])
    sweep.add_argument("--device", default="cpu", help="cpu, or cuda[:N] for every point")
    sweep.add_argument("--imgsz", type=int, default=640)
    sweep.add_argument("--iters", type=int, default=5)
    sweep.add_argument("--warmup", type=int, default=1)
    sweep.add_argument("--timeout", type=float, default=None, help="seconds per point")
    sweep.add_argument("--out", type=Path, default=Path("results") / "sweep", help="where the points' runs go")
    _add_cluster_args(sweep)
    sweep.add_argument(
        "collect_args",
        nargs="*",
        help="after --: more `collect` options for every point (default collectors: --only timing,flops,rapl)",
    )
    doctor = sub.add_parser("doctor", help="what this host can measure, and the fix for what it cannot")
    doctor.add_argument("--counters", choices=("perf", "papi", "ncu"), default="perf")
    doctor.add_argument("--device", default="cpu", help="cpu, or cuda[:N]: what the GPU collectors could do there")
    doctor.add_argument("--peaks", action="store_true", help="measure (or show the cached) peak GFLOP/s and GB/s")
    doctor.add_argument("--force", action="store_true", help="with --peaks: measure again")
    doctor.add_argument("--threads", type=int, default=default_threads(), help="with --peaks: torch threads")
    models = sub.add_parser("models", help="the model names hwprof knows, with params and GFLOPs")
    models.add_argument("--imgsz", type=int, default=640)
    from hwprof.gpu_cli import add_gpu_import_args

    add_gpu_import_args(
        sub.add_parser("gpu-import", help="recorded GPU data (Kineto CUDA trace, ncu CSV, NVML) as tables")
    )
    return parser


COMMANDS = {
    "collect": cmd_collect,
    "report": cmd_report,
    "trace": cmd_trace,
    "compare": cmd_compare,
    "sweep": cmd_sweep,
    "doctor": cmd_doctor,
    "models": cmd_models,
    "gpu-import": cmd_gpu_import,
}


def main(argv: list[str] | None = None) -> int:
    from hwprof.session import CollectError

    args = build_parser().parse_args(argv)
    console = Console()
    # Python keeps SIGINT ignored when it starts ignored (a job started with `&` by a non-interactive
    # shell, some CI runners): then `kill -INT` would be lost and a run could not be stopped cleanly.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return COMMANDS[args.command](args, console)
    except KeyboardInterrupt:
        console.print("[red]interrupted[/]")
        return EXIT_INTERRUPTED
    except (ValueError, OSError, CollectError) as exc:
        console.print(f"[red]hwprof: error:[/] {escape(str(exc))}", highlight=False)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
