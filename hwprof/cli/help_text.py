"""What `hwprof --help` and each command's `--help` say: the descriptions and examples, in a user's words, and
the formatter that prints them (prose filled to the terminal, examples as written)."""

from __future__ import annotations

import argparse
import shutil
import textwrap
from typing import TypedDict

COLLECTORS = "{collectors}"
"""In an option's help: the collectors' names, from the registry when the help is printed (the parser is built
for every command; importing every collector to build it would cost each one)."""


def with_collectors(text: str) -> str:
    """`text` with COLLECTORS replaced by the registry's names (imported here, when a help is printed)."""
    if COLLECTORS not in text:
        return text
    from hwprof.session.registry import all_collectors

    return text.replace(COLLECTORS, ", ".join(c.name for c in all_collectors()))


class HelpFormatter(argparse.HelpFormatter):
    """A description's or epilog's paragraphs (blank-line separated) filled to the terminal's width, but a
    paragraph with an indented line (examples, the exit statuses) kept as written: argparse's own formatter
    would run the examples into one line, its RawDescriptionHelpFormatter would leave prose wider than the
    terminal. An option's default is appended where it says something (not None, False or an empty list)
    and its help does not already speak of one."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        paragraphs = []
        for paragraph in text.split("\n\n"):
            lines = paragraph.splitlines()
            if any(line.startswith(" ") for line in lines):
                paragraphs.append("\n".join(indent + line for line in lines))
            else:
                paragraphs.append(
                    textwrap.fill(" ".join(paragraph.split()), width, initial_indent=indent, subsequent_indent=indent)
                )
        return "\n\n".join(paragraphs)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = with_collectors(action.help) if action.help else action.help
        if not text or "default" in text or not action.option_strings:
            return text
        default = action.default
        if default is None or default is argparse.SUPPRESS or default is False or default in ([], ""):
            return text
        if isinstance(default, list):  # a comma-list option's default as it is typed
            return f"{text} (default: {','.join(map(str, default)).replace('%', '%%')})"
        return f"{text} (default: %(default)s)"


def help_width() -> int:
    """The width argparse formats help at (the terminal's, or $COLUMNS, less its margin)."""
    return max(60, shutil.get_terminal_size().columns - 2)


HWPROF = """\
hwprof profiles YOLO inference on this machine: the time of every layer, hardware counters, the kernels and
Python stacks the time goes to, FLOPs against the machine's roofline, and energy. One collect writes a run
directory with one Perfetto trace of it all (open it at https://ui.perfetto.dev) and a report that ranks the
slowest layers and says what to change."""

HWPROF_EXAMPLES = """\
examples:
  profile a built-in model on the bundled images:
    hwprof collect --model yolov8n --imgsz 640
  profile the model inside your own program (its own stages timed too):
    hwprof collect -- python detect.py --source video.mp4
  compare two runs, and fail (exit 1) where the new one is slower by more than 5%:
    hwprof compare results/base results/new --fail-above 5%

Each command explains itself: hwprof COMMAND --help."""


EXIT_POINTER = (
    "exit status: 0 done, 1 done with a failure, 2 refused, 3 not tracked, 128 + N stopped by signal N; "
    "`hwprof help exit-codes` says each"
)


def hwprof_epilog() -> str:
    """The top-level help's end: the examples, then one line on the exit statuses (`hwprof help exit-codes`
    prints their table: 22 of the help's 61 lines were that table)."""
    import textwrap

    return f"{HWPROF_EXAMPLES}\n\n" + "\n".join(textwrap.wrap(EXIT_POINTER, width=help_width()))


HELP = """\
Help on a command (as `hwprof COMMAND --help`) or a topic: exit-codes, every exit status and what it means."""

HELP_EXAMPLES = """\
examples:
  hwprof help collect
  hwprof help exit-codes"""


COLLECT = """\
Run a YOLO model (a built-in one, your weights, or the model inside your own program) under every collector
this machine supports, one pass per group of collectors, and write a run directory:
results/<model>-<time>/ (or --out) with run.json (what ran and how each pass went), layers.csv, summary.json,
report.html, trace.pftrace (open it at https://ui.perfetto.dev) and the plots (roofline.png,
layer_times.png, ...). The report is printed at the end; `hwprof report RUN` prints it again."""

COLLECT_EXAMPLES = """\
examples:
  hwprof collect --model yolov8n --imgsz 320 --iters 20
  hwprof collect --model yolov8s --weights best.pt --images photos/ --only timing,flops
  hwprof collect --program-model detector.model -- python detect.py --source video.mp4
  hwprof collect --model yolov8n --advise            then try the changes the findings point to"""

ADVISE = """\
Run the changes a finished run's findings point to (threads, allocator, layout, precision, runtime...), each
measured in interleaved blocks against the run's own configuration, and write RUN/advice.json; the table of
what each change gained is printed, and `hwprof report RUN` shows it too."""

ADVISE_EXAMPLES = """\
examples:
  hwprof advise results/yolov8n-20260101-120000
  hwprof advise RUN --only malloc-keep,jemalloc --blocks 8"""

REPORT = """\
Print the report of a run directory that `hwprof collect` wrote: the run's health, the slowest layers, what
bounds them, and the findings. Refreshes the report's files in the run directory (summary.json, layers.csv,
report.html; the plots when it has none, or with --plots); a read-only run directory only gets a warning."""

REPORT_EXAMPLES = """\
examples:
  hwprof report results/yolov8n-20260101-120000
  hwprof report RUN --format markdown > report.md"""

TRACE = """\
Build the run's Perfetto trace again from the files of its run directory (after hwprof was updated, or when
the collect was stopped before the trace was written). Writes RUN/trace.pftrace, or --out."""

TRACE_EXAMPLES = """\
examples:
  hwprof trace results/yolov8n-20260101-120000
  hwprof trace RUN --out /tmp/run.pftrace"""

COMPARE = """\
Print two or more runs side by side, with each figure's ratio to the first run (the baseline). With
--fail-above it is a performance gate for CI: NEW is judged against BASE with bootstrap confidence intervals,
and the command exits 1 when NEW is resolved slower. Reads the run directories; writes only the files the gate
options name."""

COMPARE_EXAMPLES = """\
examples:
  hwprof compare results/fp32 results/bf16 results/onnx
  hwprof compare BASE NEW --fail-above 5% --junit gate.xml"""

SWEEP = """\
Run one collect per point of a grid (models x runtimes x precisions x threads x batches), here or on a Ray
cluster, and print one table of them. Writes each point's run directory under --out, with sweep.json and
sweep.html; a stopped sweep is resumed with --resume."""

SWEEP_EXAMPLES = """\
examples:
  hwprof sweep --models yolov8n,yolo11n --threads 1,2 --batch 1,4
  hwprof sweep --models yolov8n --runtimes torch,onnxruntime --precisions fp32,bf16 -- --only timing"""

SWEEP_JOB = """\
Follow a sweep submitted to a Ray cluster with `hwprof sweep ... --ray ADDRESS --submit`: its status, its log,
stop it, or fetch the runs it finished into DIR."""

SWEEP_JOB_EXAMPLES = """\
examples:
  hwprof sweep-job status results/sweep
  hwprof sweep-job logs results/sweep --follow"""

ATTACH = """\
Measure the model inside a running Python service, under its own traffic, without restarting it: the service
started hwprof's agent (HWPROF_AGENT=1 in its environment, or the agent's start() called in its code: docs/
attach.md), and the passes run
inside it one after another, each over a window of its real calls (timing, layers with memory, the trace; the
kernels with perf record -p). Hooks go on and come off between the service's calls; between windows it runs
untouched. The result is a run directory as collect's: report, trace, compare, runs and --track take it."""

ATTACH_EXAMPLES = """\
examples:
  HWPROF_AGENT=1 python server.py &
  hwprof attach $!
  hwprof attach 4242 --seconds 20 --program-model model
  hwprof compare results/server-* results/yolov8n-*"""

RUNS = """\
List the run directories under results/ (or DIR), newest first: id, time, model, size, threads, runtime and
precision, status, forward p50, FPS, and whether the timing pass was clean. Reads only the runs' files; a folder
whose run.json cannot be read is skipped with its reason."""

RUNS_EXAMPLES = """\
examples:
  hwprof runs
  hwprof runs results/sweep --model yolov8n --status complete
  hwprof runs --format csv > runs.csv"""

TRACK = """\
Log run directories to MLflow: each run's parameters, metrics, tags and files (report.html, summary.json,
layers.csv, the plots; the trace with --trace), its advise candidates as child runs. A run logged before is found
again by its id and not logged twice. The store: --uri, else $MLFLOW_TRACKING_URI, else RESULTS/mlflow.db (an
SQLite file: `mlflow ui --backend-store-uri sqlite:///results/mlflow.db` opens it). Needs hwprof[track]."""

TRACK_EXAMPLES = """\
examples:
  hwprof track results/yolov7-20261127-101500
  hwprof track results/*/ --uri http://mlflow.internal:5000"""

DOCTOR = """\
Say what this machine can measure: each collector available or not, with the reason and the fix, and the
runtimes and precisions it can run. With --peaks, measure (once, then cached) its peak GFLOP/s and GB/s, the
roofline's ceilings. Writes nothing but that cache."""

DOCTOR_EXAMPLES = """\
examples:
  hwprof doctor
  hwprof doctor --peaks --threads 2"""

MODELS = """\
List the model names `collect --model` takes, with their family, layers, parameters and GFLOPs at --imgsz
(each model is built once to count them). Writes nothing."""

MODELS_EXAMPLES = """\
example:
  hwprof models --imgsz 320"""

GPU_IMPORT = """\
Read GPU data recorded elsewhere (a torch.profiler trace with CUDA activities, Nsight Compute CSVs, NVML
samples) and print it as tables; with --out, write it as a run directory that report, trace and compare read."""

GPU_IMPORT_EXAMPLES = """\
examples:
  hwprof gpu-import --kineto trace_fp32.json --nvml nvml_samples.json.gz
  hwprof gpu-import --kineto trace_fp32.json --ncu layers.csv --out results/gpu-run"""


class Described(TypedDict):
    """add_parser's keywords that describe a command."""

    help: str
    description: str
    epilog: str
    formatter_class: type[argparse.HelpFormatter]


def described(help_line: str, description: str, examples: str) -> Described:
    """add_parser's keywords for a command: its line in `hwprof --help`, its description and its examples."""
    return {
        "help": help_line,
        "description": description,
        "epilog": examples,
        "formatter_class": HelpFormatter,
    }
