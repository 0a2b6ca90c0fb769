"""Scalene's JSON profile and hwprof's profiling window, parsed once into what the converter uses."""

from __future__ import annotations

from dataclasses import dataclass, field

from hwprof.schema.codec import JsonObject, Record

MEMORY_KEYS = ("n_malloc_mb", "n_peak_mb", "n_avg_mb", "n_mallocs", "n_python_fraction", "n_copy_mb_s")


@dataclass
class ScaleneFunction:
    """One function of a profiled file: its name (Scalene's "line"), definition line and CPU percentages."""

    name: str
    lineno: int | None
    cpu_percent_python: float
    cpu_percent_c: float
    sys_percent: float


@dataclass
class ScaleneLine:
    """One line of a profiled file: CPU percentages, kept sample times (perf_counter seconds), memory."""

    lineno: int
    code: str
    start_function_line: int | None
    cpu_percent_python: float
    cpu_percent_c: float
    sys_percent: float
    core_utilization: float
    cpu_samples: list[float]
    memory: dict[str, float]


@dataclass
class ScaleneFile:
    functions: list[ScaleneFunction] = field(default_factory=list)
    lines: list[ScaleneLine] = field(default_factory=list)

    def samples_of(self, lineno: int) -> list[float]:
        """The sample times of the (first) line with this number."""
        for line in self.lines:
            if line.lineno == lineno:
                return list(line.cpu_samples)
        return []


@dataclass
class ScaleneProfile:
    """What hwprof reads of Scalene's JSON: the profiled files, elapsed time and the memory footprint."""

    files: dict[str, ScaleneFile]
    elapsed_s: float
    memory: bool
    max_footprint_mb: float | None
    footprint: list[tuple[float, float]]
    """Memory footprint samples: (ns since Scalene's start, MB)."""


@dataclass
class ScaleneWindow:
    """scalene.window.json: monotonic times around Scalene's start and stop."""

    start_ns: int | None = None
    stop_ns: int | None = None
    scalene_start_ns: int | None = None
    """Scalene's own start, the origin of its footprint samples (start_ns where the window has none)."""


@dataclass(kw_only=True)
class WindowFile(Record):
    """scalene.window.json as the collector in the worker writes it (keys in the order they were set; {}
    when the measured iterations never started)."""

    under_scalene: bool | None = None
    pid: int | None = None
    """The worker's process, which Scalene runs the program in: its interpreter shims name it (`--pid=PID`)."""
    start_ns: int | None = None
    start_call_us: float | None = None
    """How long Scalene's start() took."""
    scalene_start_ns: int | None = None
    paused: list[list[int]] | None = None
    """[pause, resume] monotonic times of each clean iteration of the paired pass (Scalene off)."""
    stop_ns: int | None = None


def window_from_json(data: JsonObject) -> ScaleneWindow:
    return ScaleneWindow(data.get("start_ns"), data.get("stop_ns"), data.get("scalene_start_ns", data.get("start_ns")))


def _percent(row: JsonObject, key: str) -> float:
    return float(row.get(key, 0.0))


def _function_from_json(fn: JsonObject) -> ScaleneFunction:
    return ScaleneFunction(
        str(fn.get("line", "")),
        fn.get("lineno"),
        _percent(fn, "n_cpu_percent_python"),
        _percent(fn, "n_cpu_percent_c"),
        _percent(fn, "n_sys_percent"),
    )


def _line_from_json(row: JsonObject) -> ScaleneLine:
    return ScaleneLine(
        int(row["lineno"]),
        str(row.get("line", "")),
        row.get("start_function_line"),
        _percent(row, "n_cpu_percent_python"),
        _percent(row, "n_cpu_percent_c"),
        _percent(row, "n_sys_percent"),
        _percent(row, "n_core_utilization"),
        [float(t) for t in row.get("cpu_samples_list", [])],
        {k: float(row.get(k, 0.0)) for k in MEMORY_KEYS},
    )


def parse_scalene_json(data: JsonObject, source: str) -> ScaleneProfile:
    """Scalene's JSON profile; ValueError when it is not one."""
    if "files" not in data or "elapsed_time_sec" not in data:
        raise ValueError(f"{source}: not a Scalene JSON profile")
    files = {
        name: ScaleneFile(
            [_function_from_json(fn) for fn in info.get("functions", [])],
            [_line_from_json(row) for row in info.get("lines", [])],
        )
        for name, info in data["files"].items()
    }
    return ScaleneProfile(
        files,
        float(data["elapsed_time_sec"]),
        bool(data.get("memory")),
        data.get("max_footprint_mb"),
        [(ns, mb) for ns, mb in data.get("samples", [])],
    )
