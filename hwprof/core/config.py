"""RunConfig: everything a collection needs to know, passed unchanged from the CLI to every pass."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from hwprof.core.program_spec import MIN_WARMUP, ProgramSpec

if TYPE_CHECKING:
    from hwprof.schema.run import RunConfigDoc

PASS_ORDER: tuple[str, ...] = (
    "timing",
    "layers",
    "kernels",
    "trace",
    "gpu",
    "ncu",
    "ncu_range",
    "scalene",
    "callgrind",
)
"""Passes run in this order, each in its own child process (see session.py)."""


COUNTER_THREADS = ("auto", "all", "model")
ADVISE_BLOCKS = 8
"""ABBA blocks per advice candidate (4 iterations each) unless asked otherwise (`--blocks`)."""


def default_threads() -> int:
    """CPUs this process may run on (affinity), which is what torch's intra-op pool should use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


PIPELINE_ONLY = (
    "weights",
    "images",
    "annotate",
    "imgsz",
    "batch",
    "conf",
    "iou",
    "seed",
    "precision",
    "channels_last",
    "extra",
)
"""The built-in pipeline's options, which a program's run does not use (left out of its run.json)."""


class ExtraOptions(TypedDict, total=False):
    """RunConfig.extra: the options no other field holds (the library's and the bench scripts' `extra=`; --rect),
    each read by the one part named; config.json and run.json keep them as given. Where one is absent, its
    reader's default applies."""

    rect: bool
    """--rect: each image letterboxed to its own shape, not the square (batch 1, the torch runtime)."""
    paired: bool
    """False: no paired clean iterations in a pass (session.pass_runner)."""
    early_launch: bool
    """False: each pass's worker launched at its turn, not beside the previous pass's close (session.turn)."""
    timing_resolve: bool
    """True: the built-in pipeline's timing pass stops once its p50s are resolved, --iters its upper bound
    (session.timing_stop); the command line sets it where --iters is absent. Absent: --iters measured iterations, as
    given (a program's passes run the calls they planned either way)."""
    warmup_steady: bool
    """True: a pass of the built-in pipeline warms up until warm, RunConfig.warmup the most (session.warmup); the
    command line sets it where --warmup and --iters are absent. Absent: RunConfig.warmup warm-up iterations."""
    attach_seconds: float
    """`hwprof attach --seconds`: each window's measured calls end this long after its first (hwprof.agent.window);
    with --no-agent, how long the process is sampled from outside (hwprof.agent.outside)."""
    powercap_root: str
    """rapl: the powercap folder instead of /sys/class/powercap."""
    event_source_root: str
    """rapl: the perf event_source folder instead of /sys/bus/event_source/devices."""
    rapl_layer_reads: bool
    """rapl: False reads at no layer marker."""
    onednn_verbose: bool
    """torch_profiler: False for no oneDNN verbose iteration."""
    onednn_iterations: int
    """torch_profiler: measured iterations with oneDNN verbose on."""
    profiler_shapes: bool
    """torch_profiler: False records no input shapes."""
    profiler_shapes_measured: bool
    """torch_profiler: the shapes recorded in the measured iterations, not in a warm-up one."""
    profiler_flops: bool
    """torch_profiler: with_flops on (slows the forward)."""
    profiler_ranges: bool
    """torch_profiler: False opens no layer range (to measure their cost)."""
    profiler_fast_ranges: bool
    """torch_profiler: False uses the record_function ops instead of _RecordFunctionFast."""
    callgrind_iters: int
    """callgrind: iterations run under valgrind."""
    cuda_graph_iters: int
    """cuda_graph: replays timed."""
    perf_path: str
    """perf_sampling: the perf executable."""
    perf_callchains: bool
    """perf_sampling: False records no call chains (to measure what they cost)."""
    sampler_in_forward: bool
    """perf_events: the interval sampler left running inside each measured forward."""
    perf_max_group: int
    """perf_events: the most events in one group."""
    counter_reads_compare: bool
    """perf_events: even measured iterations read every layer, odd ones rotate (both methods in one run)."""
    counter_reads_every: int
    """perf_events: under --counter-reads rotate, each layer read in 1 of this many measured iterations."""
    pyspy_path: str
    """pyspy: the py-spy executable."""
    pyspy_switch: bool
    """pyspy: False leaves it sampling in the clean iterations too."""
    pyspy_format: str
    """pyspy: chrometrace (the default) or speedscope."""
    scalene_path: str
    """scalene: the scalene executable."""
    cpu_sysfs_root: str
    """sysstat: the folder of the cpu<N>/cpufreq files instead of /sys/devices/system/cpu."""
    sysstat_stage_peak: str
    """sysstat: "sampled" for the stage peak RSS from the samples, not the high-water mark reset per stage."""


_SIMPLE_TYPES: dict[str, tuple[type | tuple[type, ...], str]] = {
    "int": (int, "an integer"),
    "float": ((int, float), "a number"),
    "bool": (bool, "True or False"),
    "str": (str, "a string"),
}


OPTION_OF = {"pass_timeout_s": "--timeout", "budget_s": "--budget"}
"""RunConfig fields whose command-line option is not --<field with dashes>."""


def until_resolved(iters: int | None, warmup: int | None) -> ExtraOptions:
    """RunConfig.extra's stopping modes for --iters and --warmup as given (None: not given): each pass measures until
    its figures are resolved without --iters, and warms up until warm without either."""
    return {"timing_resolve": iters is None, "warmup_steady": warmup is None and iters is None}


@dataclass
class RunConfig:
    model: str = "yolov7"
    runtime: str = "torch"
    """What runs the forward: torch, onnxruntime or openvino (see workload/runtime.py)."""
    precision: str = "fp32"
    """The precision asked for; what actually executed is recorded per pass (runtime.json)."""
    device: str = "cpu"
    """cpu, or cuda[:N]: the torch runtime on an NVIDIA GPU (workload/rt_cuda.py)."""
    channels_last: bool = False
    """Model and input in channels_last memory format (NHWC), on either device."""
    weights: str | None = None
    images: str | None = None
    """A folder of images, one image, or a video file (None: the images shipped in the ultralytics wheel)."""
    annotate: str | None = None
    """Where the annotated frames go (`--annotate`): a video file for a video input, else a folder of images;
    None: nothing is written, and the pipeline has no annotate and encode stages."""
    imgsz: int = 640
    batch: int = 1
    threads: int = field(default_factory=default_threads)
    warmup: int = 3
    iters: int = 20
    depth: int = 1
    conf: float = 0.25
    iou: float = 0.45
    seed: int = 0
    only: list[str] = field(default_factory=list)
    skip: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    counters: str = "perf"
    counter_reads: str = "rotate"
    """Per-layer counters (perf_events): "rotate" reads each layer's boundaries in a planned share of the
    measured iterations, "every" in all of them (hwprof.perf.layer_reads)."""
    counter_threads: str = "auto"
    """Which threads perf_events counts: "all" (inherit=1: the model's thread and every thread created after
    it, torch's intra-op pool included), "model" (the model's thread alone, so that a read never interrupts
    another CPU), "auto" (see counted_threads)."""
    interval_ms: float = 10.0
    pyspy_rate: int = 25
    """Samples/s. Where torch's threads take every CPU, each sample takes a CPU from one of them: the trace pass
    cost 1.10-1.12x at 50 Hz against 1.06-1.08x at 25 Hz on yolov7-tiny at 320 with 2 threads here (paired, two
    runs each), and torch.profiler already records every op of the forward. With --native, unwinding takes
    longer than 5 ms here: 200 Hz paused yolov7 12x, 50 Hz 1.7x."""
    pyspy_native: bool = False
    """py-spy --native: unwind native stacks too, which pauses every thread per sample (kernels come from perf)."""
    perf_rate: int = 0
    """perf record samples/s per thread in the kernels pass; 0 picks one from the timing pass (see perf_sampling)."""
    scalene_memory: bool = False
    profiler_stack: bool = False
    pass_timeout_s: float = 900.0
    budget_s: float = 0.0
    """--budget: the seconds the collect's passes share (0: none); each pass stops its measuring when its share
    runs out, saying what it could not resolve (hwprof.session.budget)."""
    paired_extend_ratio: float = 1.0
    """A paired pass whose ABBA blocks do not resolve its cost adds blocks for up to this many times
    the planned blocks' time (0: never), at most paired_extend_max_s (hwprof.session.paired.extend)."""
    paired_extend_max_s: float = 120.0
    extra: ExtraOptions = field(default_factory=ExtraOptions)
    program: ProgramSpec | None = None
    """The user's own program (`collect -- python SCRIPT ...`) instead of the built-in pipeline."""

    @property
    def attached(self) -> int | None:
        """The running service's PID under `hwprof attach` (ProgramSpec.attached); None for any other run."""
        return self.program.attached if self.program is not None else None

    def validate(self) -> None:
        """Raise ValueError with a one-line message for values no pass could run with."""
        self._check_types()
        if self.imgsz < 32 or self.imgsz % 32:
            raise ValueError(f"--imgsz must be a positive multiple of 32 (got {self.imgsz})")
        for name in ("batch", "threads", "iters", "depth"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name} must be at least 1 (got {getattr(self, name)})")
        if self.warmup < 0:
            raise ValueError(f"--warmup must be 0 or more (got {self.warmup})")
        if self.depth > 2:
            raise ValueError(f"--depth is 1 (top-level layers) or 2 (one level deeper), got {self.depth}")
        if not 0.0 <= self.conf <= 1.0 or not 0.0 <= self.iou <= 1.0:
            raise ValueError("--conf and --iou must lie in [0, 1]")
        if self.counters not in ("perf", "papi", "callgrind", "ncu"):
            raise ValueError(f"--counters is 'perf', 'papi', 'callgrind' or 'ncu' (got {self.counters!r})")
        if self.counters == "ncu" and self.device == "cpu":
            raise ValueError("--counters ncu (Nsight Compute) needs --device cuda")
        if self.counter_reads not in ("rotate", "every"):
            raise ValueError(f"--counter-reads is 'rotate' or 'every' (got {self.counter_reads!r})")
        if self.counter_threads not in COUNTER_THREADS:
            raise ValueError(f"--counter-threads is 'auto', 'all' or 'model' (got {self.counter_threads!r})")
        if self.interval_ms <= 0:
            raise ValueError("--interval-ms must be positive")
        if self.perf_rate < 0:
            raise ValueError(f"--perf-rate must be 0 (auto) or a positive rate in Hz (got {self.perf_rate})")
        from hwprof.core.runtime_names import check_runtime_precision

        check_runtime_precision(self.runtime, self.precision, self.device)
        if self.runtime != "torch" and self.extra.get("rect"):
            raise ValueError(f"--rect changes the input shape per image; {self.runtime} runs a fixed-shape export")
        if self.paired_extend_ratio < 0 or self.paired_extend_max_s < 0:
            raise ValueError("paired_extend_ratio and paired_extend_max_s must be 0 or more")
        if self.pass_timeout_s <= 0:
            raise ValueError("--timeout must be positive")
        if self.budget_s < 0:
            raise ValueError(f"--budget must be 0 (none) or a positive time (got {self.budget_s:g} s)")
        if self.program is not None:
            self._validate_program()

    def _check_types(self) -> None:
        """A value of another type than its field's (the library's keywords are not parsed as the command line's
        options are): one line naming the option, before a comparison fails inside."""
        for f in fields(self):
            want = _SIMPLE_TYPES.get(str(f.type))
            value = getattr(self, f.name)
            if want is None or (isinstance(value, want[0]) and not (isinstance(value, bool) and want[0] is not bool)):
                continue
            option = OPTION_OF.get(f.name, "--" + f.name.replace("_", "-"))
            raise ValueError(f"{option} must be {want[1]} (got {value!r})")

    def _validate_program(self) -> None:
        if self.warmup < MIN_WARMUP:
            raise ValueError(
                f"--warmup must be at least {MIN_WARMUP} for a program (got {self.warmup}): the first call after the "
                "one that found the model opens the first whole iteration, so it is never measured"
            )
        if self.runtime != "torch" or self.precision != "fp32" or self.channels_last:
            raise ValueError(
                "a program runs its own model as it wrote it: --runtime, --precision and --channels-last are for "
                "the built-in pipeline (`hwprof collect --model NAME --runtime ...`)"
            )

    def workload_code(self) -> list[str]:
        """The folders of the workload's own code beside hwprof's: a user's program's (a profiler of Python lines
        profiles them); none for the built-in pipeline, whose code is hwprof's."""
        return [self.program.code_dir] if self.program is not None else []

    def counted_threads(self) -> str:
        """--counter-threads resolved: "auto" is "model" on a GPU run (the forward's host work is launching
        kernels, on the model's thread; torch's intra-op threads only spin there, and reading their counters
        interrupts each of their CPUs) and "all" on the CPU (the forward's work is on every intra-op thread)."""
        if self.counter_threads != "auto":
            return self.counter_threads
        return "all" if self.device == "cpu" else "model"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def recorded(self, where: str = "run.json") -> RunConfigDoc:
        """The options as run.json records them (`where` names it in a RunDirError): a program's run leaves out
        the built-in pipeline's, which it did not use (its input, size and batch are the program's own: the
        passes' input shapes say them)."""
        from hwprof.schema.codec import json_value
        from hwprof.schema.run import RunConfigDoc

        out = self.to_dict()
        if self.program is not None:
            for name in PIPELINE_ONLY:
                out.pop(name, None)
        return RunConfigDoc.from_json(json_value(out), where, "config.")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if isinstance(values.get("program"), dict):
            values["program"] = ProgramSpec.from_dict(values["program"])
        return cls(**values)

    def resolve_paths(self, base: Path | None = None) -> None:
        """Make --weights, --images and --annotate absolute against where hwprof was run (default: the current
        directory): each pass's worker runs inside the run directory, where a relative path breaks."""
        base = Path.cwd() if base is None else base
        if self.weights:
            self.weights = _absolute(self.weights, base, "--weights")
        if self.images:
            self.images = _absolute(self.images, base, "--images")
        if self.annotate:
            self.annotate = _absolute(self.annotate, base, "--annotate")


def _absolute(value: str, base: Path, option: str) -> str:
    """`value` made absolute against `base`, its links followed; ValueError (one line) for a link that leads back
    to itself (pathlib's RuntimeError "Symlink loop", a traceback before)."""
    from hwprof.core.uservalue import shown

    try:
        return str((base / Path(value).expanduser()).resolve())
    except RuntimeError:
        raise ValueError(
            f"{option} {shown(value)} is a symbolic link that leads back to itself (a loop); fix: point it at a "
            "real path"
        ) from None
