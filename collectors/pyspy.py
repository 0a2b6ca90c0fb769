"""py-spy attached to the trace pass's worker: sampled Python + native stacks, per stage and layer.

The parent runs the real `py-spy record -p PID --native --threads --idle -r RATE --format
chrometrace` right after spawning the worker; py-spy exits when the worker exits, and finish()
converts its samples. The in-process part of this collector does nothing.

Time. py-spy's chrometrace `ts` is microseconds since py-spy created its recorder, stamped when
its recorder thread handles a sample (on a busy host it lags the sampler: "N s behind in
sampling"), and consecutive samples of a thread with the same stack emit nothing, so a stack's
B..E interval covers every sample that saw it. The offset to CLOCK_MONOTONIC is measured from
events visible on both sides: the pipeline's stage functions (`Pipeline.forward` ...) appear in
the samples, and their markers carry monotonic times. The first sample that shows a stage frame
was taken after the stage's B marker, and the change before it (a sample without the frame)
before it; likewise for E. So each transition paired with its marker bounds the offset on both
sides: marker - ts <= offset < marker - previous_ts.
1. Coarse: the offset consistent with the most forward-stage transitions (a sweep over every
   transition/marker pair; see _coarse_offset), which needs no pairing by order: short stages
   are often not sampled at all, and two forwards can merge into one sampled run.
2. Each transition is paired with the latest marker of its stage edge before it, and the bounds
   are intersected. If they all intersect, one offset (the middle) with `bound_*_us` = half the
   width; otherwise the recorder's lag varied, and the offset is measured at each transition and
   interpolated in between (`offset_range_us` says by how much it moved).
`launch_lag_ms` (py-spy's zero minus the monotonic time the parent launched it, less any
recorder lag) is kept as a cross-check; `max_behind_s` is the worst lag py-spy reported.

Attribution. A sample's stage is read from its own stack (the Pipeline.<stage> frame), which needs
no clock; the clock places the samples in the measured iterations and in the layer spans: each
converted stack interval is split over the layer spans from markers.jsonl by overlap (consecutive
layers often share one stack), so a sample's layer is known to within one sampling period plus the
clock bound. `stage_agreement` in the clock summary is the share of samples (at stack changes, in
the measured iterations) whose converted time falls in the markers of the stage their own stack
shows: a direct check of the alignment.
Shares are of sampled time, by leaf frame:
`python` (a Python frame), `native` (a native frame), `waiting` (a leaf in the OpenMP runtime or a
known blocking call: futex, poll, sleep, condition wait, threading.wait; a heuristic, since libgomp
and libc are stripped here and their internal wait loops show as bare addresses). Native frames
carry the library (libtorch_cpu, libgomp, libc ...); oneDNN is linked statically into
libtorch_cpu, so `dnnl::` symbols are reported as library "libdnnl (in libtorch_cpu)" and code
with no file mapping (oneDNN's JIT kernels) as "JIT code".

Speedscope files (`extra["pyspy_format"] = "speedscope"`) carry no timestamps: they give the
pass's hottest functions and shares, with no stage, layer or clock (summary says so).

Which collectors may share a pass, and why:
- torch_profiler + pyspy share the trace pass: py-spy reads the worker's memory from outside and
  sees the profiler's own frames (record_function calls) as a small Python cost; the profiler sees
  py-spy only as the pauses below. Their overheads add up, which the trace pass's forward p50 over
  the timing pass's shows (scripts/bench_trace_overhead.py measures each alone and both together).
- py-spy in its default blocking mode stops every thread of the worker for each sample (needed
  for --native unwinding), which stretches layer times and perturbs OpenMP barriers: it must not
  share a pass with the per-layer counters or the clean timing pass. `--nonblocking` avoids the
  pauses but py-spy cannot then unwind native stacks (py-spy refuses --native with it), so native
  frames are then unavailable.
- Scalene has its own pass and shares it with nothing: it installs signal handlers and timers
  (SIGALRM from a 10 ms ITIMER_REAL for CPU samples; SIGXCPU/SIGXFSZ/SIGPROF for allocation and
  copy sampling in memory mode; SIGILL/SIGBUS to switch profiling on and off), replaces the
  allocator through LD_PRELOAD=libscalene.so in memory mode, imports torch before the worker's
  collectors open (so perf counters could no longer be opened before torch's thread pool), and
  with `--gpu` starts its own torch.profiler, which cannot run beside ours. Its samples would also
  count the other tools' work, and py-spy's pauses would stretch its wall-clock samples.
- torch.profiler costs a few microseconds per aten op and a record_function per marker: it must
  not share the timing or counter passes, whose numbers it would inflate.
- The system samplers (RSS, frequency, per-thread CPU from /proc) may join the trace pass: they
  add one sampling thread, which py-spy then also samples.
"""

from __future__ import annotations

import bisect
import functools
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwprof.collectors.base import AttachedTool, Capability, Collector, CollectorResult, PassContext

from hwprof.records import MetricTables, Span, ThreadName, metrics_path, records_path, write_records
from hwprof.workload.markers import STAGES, Marker, read_markers

if TYPE_CHECKING:
    from hwprof.config import RunConfig

NAME = "pyspy"
PIPELINE_FILE = "hwprof/workload/pipeline.py"
STAGE_FRAMES = {f"Pipeline.{stage}": stage for stage in STAGES}
TOP = 10
WAIT_SYMBOLS = re.compile(
    r"futex|pthread_cond_|sem_(timed)?wait|epoll_wait|^__?poll$|^poll$|^select$|nanosleep|sched_yield"
    r"|gomp_.*barrier|gomp_.*wait|do_spin|do_wait"
)
WAIT_PYTHON = {
    ("wait", "threading.py"),
    ("sleep", ""),
    ("select", "selectors.py"),
    ("_wait_for_tstate_lock", "threading.py"),
}
THREAD_FRAME = re.compile(r"^thread \((\d+)\)(?::\s*(.*))?$")
SPEEDSCOPE_UNITS_NS = {"seconds": 1e9, "milliseconds": 1e6, "microseconds": 1e3, "nanoseconds": 1.0}
PAIR_TOLERANCE_NS = 100_000_000
"""How far a transition's marker may sit from where the forward anchors put it (recorder lag drift)."""
UNRESOLVED = re.compile(r"^0x[0-9a-fA-F]+$")
PERMISSION_WORDS = ("permission denied", "operation not permitted", "ptrace", "eperm")


# ----------------------------------------------------------------------------- probe


def pyspy_binary(config: RunConfig) -> str | None:
    """extra["pyspy_path"], else py-spy on PATH, else the one beside this Python."""
    explicit = config.extra.get("pyspy_path")
    if explicit:
        return str(explicit) if Path(explicit).is_file() and os.access(explicit, os.X_OK) else None
    found = shutil.which("py-spy")
    if found:
        return found
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.is_file() else None


def _ptrace_fix() -> str:
    scope = Path("/proc/sys/kernel/yama/ptrace_scope")
    fixes = []
    if scope.exists() and scope.read_text().strip() not in ("", "0"):
        fixes.append("sudo sysctl -w kernel.yama.ptrace_scope=0")
    if Path("/.dockerenv").exists() or Path("/run/.containerenv").exists():
        fixes.append("run the container with --cap-add SYS_PTRACE")
    if os.geteuid() != 0:
        fixes.append("or run hwprof as root (sudo -E hwprof collect ...)")
    return "; ".join(fixes) or "grant CAP_SYS_PTRACE (e.g. docker run --cap-add SYS_PTRACE) or run as root"


@functools.cache
def _probe(binary: str) -> Capability:
    """A real `py-spy dump` of a short-lived Python child."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(20)"])
    try:
        time.sleep(0.3)
        done = subprocess.run([binary, "dump", "--pid", str(child.pid)], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Capability.unavailable(f"py-spy dump could not run: {exc}", "pip install py-spy")
    finally:
        child.kill()
        child.wait()
    text = (done.stdout + done.stderr).strip()
    if done.returncode == 0 and "<module>" in text:
        version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()
        return Capability.ok(binary=binary, version=version)
    last = text.splitlines()[-1] if text else f"exit status {done.returncode}"
    if any(word in text.lower() for word in PERMISSION_WORDS):
        return Capability.unavailable(f"py-spy may not read another process: {last}", _ptrace_fix())
    return Capability.unavailable(f"py-spy dump of a test process failed: {last}", "pip install --upgrade py-spy")


# ----------------------------------------------------------------------------- collector


class PySpyCollector(Collector):
    name = NAME
    title = "py-spy sampling profiler (Python + native stacks)"
    pass_name = "trace"

    @classmethod
    def probe(cls, config: RunConfig) -> Capability:
        binary = pyspy_binary(config)
        if binary is None:
            where = config.extra.get("pyspy_path") or "PATH or beside the Python interpreter"
            return Capability.unavailable(f"py-spy binary not found ({where})", "pip install py-spy")
        return _probe(binary)

    def close(self, ctx: PassContext) -> CollectorResult:
        return CollectorResult(
            "skipped", reason="py-spy runs in the parent: its result is the one attach().finish() returns"
        )

    def attach(self, pid: int, ctx: PassContext) -> AttachedTool | None:
        binary = pyspy_binary(self.config)
        if binary is None:
            raise FileNotFoundError("py-spy binary not found; fix: pip install py-spy")
        fmt = str(self.config.extra.get("pyspy_format", "chrometrace"))
        if fmt not in ("chrometrace", "speedscope"):
            raise ValueError(f"pyspy_format is chrometrace or speedscope (got {fmt!r})")
        return PySpyTool(binary, pid, ctx, fmt)


COLLECTOR = PySpyCollector


class PySpyTool(AttachedTool):
    def __init__(self, binary: str, pid: int, ctx: PassContext, fmt: str) -> None:
        self.ctx = ctx
        self.fmt = fmt
        config = ctx.config
        self.native = not config.pyspy_nonblocking
        self.raw = ctx.out_dir / f"{NAME}.{fmt}.json"
        self.raw.unlink(missing_ok=True)  # never convert a file left by an earlier run
        self.log = ctx.out_dir / f"{NAME}.log"
        command = [binary, "record", "-p", str(pid), "--threads", "--idle", "-r", str(config.pyspy_rate)]
        command += ["--format", fmt, "-o", str(self.raw)]
        command += ["--native"] if self.native else ["--nonblocking"]
        self.command = command
        ctx.out_dir.mkdir(parents=True, exist_ok=True)
        self._log_handle = open(self.log, "w")  # noqa: SIM115 - py-spy writes to it until finish()
        self.launched_ns = time.monotonic_ns()
        self.process = subprocess.Popen(command, stdout=self._log_handle, stderr=subprocess.STDOUT)

    def finish(self, worker_returncode: int | None, timeout_s: float = 30.0) -> CollectorResult:
        try:
            returncode = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGINT)  # py-spy writes what it has on Ctrl-C
            try:
                returncode = self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                returncode = self.process.wait()
        self._log_handle.close()
        log_text = self.log.read_text(errors="replace") if self.log.exists() else ""
        artifacts = [self.ctx.relpath(self.log)]
        if not self.raw.exists() or self.raw.stat().st_size == 0:
            return self._failure(returncode, log_text, artifacts)
        try:
            if self.fmt == "speedscope":
                converted = convert_speedscope(self.raw)
            else:
                markers_file = self.ctx.out_dir / "markers.jsonl"
                markers = read_markers(markers_file) if markers_file.exists() else []
                converted = convert_chrometrace(self.raw, markers, self.ctx.config.pyspy_rate, self.launched_ns)
        except (ValueError, KeyError) as exc:
            return CollectorResult(
                "failed",
                reason=f"py-spy output could not be converted: {exc}",
                artifacts=[*artifacts, self.ctx.relpath(self.raw)],
            )
        gz = self.raw.with_suffix(".json.gz")
        with open(self.raw, "rb") as src, gzip.open(gz, "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst)
        self.raw.unlink()
        artifacts.append(self.ctx.relpath(gz))
        artifacts += [self.ctx.relpath(self.ctx.out_dir / n) for n in write_outputs(self.ctx.out_dir, converted)]
        summary = converted.summary
        summary.update(
            command=" ".join(self.command),
            returncode=returncode,
            native=self.native,
            errors=_sample_errors(log_text),
            samples_reported=_samples_reported(log_text),
            max_behind_s=max((float(x) for x in re.findall(r"([\d.]+)s behind in sampling", log_text)), default=0.0),
        )
        if not self.native:
            summary["native_unavailable"] = "py-spy cannot unwind native stacks with --nonblocking"
        status = "ok" if returncode == 0 else "partial"
        reason = "" if returncode == 0 else f"py-spy exited with status {returncode}: {_last_line(log_text)}"
        fix = ""
        if summary["clock"]["mode"] == "launch-time" and status == "ok":
            status = "partial"
            reason = "too few samples to see a forward stage begin or end: the samples' times are estimated from "
            reason += "py-spy's launch time (tens of ms off), so their layer attribution is unreliable"
            fix = "raise --iters or --pyspy-rate so that several samples fall in each forward stage"
        if worker_returncode not in (0, None) and status == "ok":
            status, reason = "partial", f"the worker exited with status {worker_returncode}"
        return CollectorResult(status, reason=reason, fix=fix, summary=summary, artifacts=artifacts)

    def _failure(self, returncode: int, log_text: str, artifacts: list[str]) -> CollectorResult:
        last = _last_line(log_text)
        if returncode < 0:
            why = f"py-spy was killed by {signal.Signals(-returncode).name} before writing its samples"
        else:
            why = f"py-spy exited with status {returncode} and wrote no samples: {last}"
        fix = _ptrace_fix() if any(w in log_text.lower() for w in PERMISSION_WORDS) else ""
        return CollectorResult("failed", reason=why, fix=fix, artifacts=artifacts)


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "no output"


def _samples_reported(text: str) -> int | None:
    found = re.findall(r"Samples: (\d+)", text)
    return int(found[-1]) if found else None


def _sample_errors(text: str) -> int | None:
    found = re.findall(r"Errors: (\d+)", text)
    return int(found[-1]) if found else None


# ----------------------------------------------------------------------------- frames


@dataclass(frozen=True)
class Frame:
    name: str
    file: str
    line: int

    @property
    def is_python(self) -> bool:
        return self.file.endswith(".py") or self.file.startswith("<frozen") or self.file == "<string>"

    @property
    def library(self) -> str:
        """For a native frame: libtorch_cpu, libgomp, libc, libdnnl (in libtorch_cpu), JIT code."""
        if self.is_python:
            return "python"
        if self.name.startswith("dnnl::") or "dnnl::impl" in self.name:
            return "libdnnl (in libtorch_cpu)"
        if not self.file or self.file == "?":
            return "JIT code"
        base = os.path.basename(self.file)
        return base.split(".so")[0] if ".so" in base else base

    def label(self) -> str:
        if self.is_python:
            return f"{self.name} ({_short_path(self.file)}:{self.line})"
        if UNRESOLVED.match(self.name):
            return f"(no symbol) [{self.library}]"  # addresses differ per run (ASLR): one row per library
        return f"{self.name} [{self.library}]"


def _short_path(path: str) -> str:
    for anchor in ("site-packages/", "/hwprof/", "/lib/python3"):
        if anchor in path:
            tail = path.split(anchor, 1)[1]
            return ("hwprof/" + tail) if anchor == "/hwprof/" else tail
    return os.path.basename(path) or path


def leaf_state(stack: tuple[Frame, ...]) -> str:
    """python, native or waiting, by the leaf frame (a heuristic for waiting: see the module doc)."""
    if not stack:
        return "waiting"
    leaf = stack[-1]
    if leaf.is_python:
        base = os.path.basename(leaf.file)
        if (leaf.name, base) in WAIT_PYTHON or (leaf.name, "") in WAIT_PYTHON:
            return "waiting"
        return "python"
    if leaf.library == "libgomp" or WAIT_SYMBOLS.search(leaf.name):
        return "waiting"
    return "native"


# ----------------------------------------------------------------------------- chrometrace


@dataclass
class Segment:
    """One stack held by a thread from one recorded change to the next (one or more samples)."""

    tid: int
    start_us: int
    end_us: int
    prev_us: int | None
    """Time of the change before this one on the same thread (a sample without this stack)."""
    stack: tuple[Frame, ...]


@dataclass
class ThreadInfo:
    key: int
    """py-spy's thread key (a pthread id in 0.4.x, a small remapped id in later versions)."""
    os_tid: int | None
    name: str


def _open_text(path: Path) -> Any:
    return gzip.open(path, "rt") if path.suffix == ".gz" else open(path)


def load_chrometrace(path: Path) -> tuple[list[Segment], dict[int, ThreadInfo]]:
    with _open_text(path) as handle:
        events = json.load(handle)
    if isinstance(events, dict):
        events = events.get("traceEvents", [])
    if not isinstance(events, list):
        raise ValueError(f"{path}: not a chrome trace")
    threads: dict[int, ThreadInfo] = {}
    per_thread: dict[int, list[dict[str, Any]]] = defaultdict(list)
    interned: dict[tuple[str, str, int], Frame] = {}
    for event in events:
        tid = int(event.get("tid", 0))
        if event.get("ph") == "M" and event.get("name") == "thread_name":
            label = str(event.get("args", {}).get("name", ""))
            os_tid, _, name = label.partition(": ")
            threads[tid] = ThreadInfo(tid, int(os_tid) if os_tid.isdigit() else None, name)
        elif event.get("ph") in ("B", "E"):
            per_thread[tid].append(event)
    segments: list[Segment] = []
    for tid, evs in per_thread.items():
        stack: list[Frame] = []
        current: int | None = None
        previous: int | None = None
        for event in evs:
            ts = int(event["ts"])
            if current is not None and ts != current:
                if stack:
                    segments.append(Segment(tid, current, ts, previous, tuple(stack)))
                previous = current
            current = ts
            args = event.get("args") or {}
            name, file, line = str(event["name"]), str(args.get("filename", "")), int(args.get("line") or 0)
            if event["ph"] == "B":
                match = THREAD_FRAME.match(name) if not file else None
                if match:
                    info = threads.get(tid)
                    if info is None or info.os_tid is None:
                        threads[tid] = ThreadInfo(tid, int(match.group(1)), match.group(2) or "")
                    stack.append(Frame(name, "", 0))
                    continue
                key = (name, file, line)
                stack.append(interned.setdefault(key, Frame(name, file, line)))
            else:
                for depth in range(len(stack) - 1, -1, -1):
                    if stack[depth].name == name:
                        del stack[depth:]
                        break
    for tid in per_thread:
        threads.setdefault(tid, ThreadInfo(tid, None, ""))
    for seg in segments:  # drop the thread pseudo-frame
        if seg.stack and THREAD_FRAME.match(seg.stack[0].name) and not seg.stack[0].file:
            seg.stack = seg.stack[1:]
    segments.sort(key=lambda s: (s.tid, s.start_us))
    return segments, threads


# ----------------------------------------------------------------------------- clock


@dataclass
class Transition:
    stage: str
    phase: str
    ts_us: int
    prev_us: int | None


def _stage_of(stack: tuple[Frame, ...]) -> str | None:
    """The stage a sample was in, from its Pipeline.<stage> frame (None between stages)."""
    for frame in stack:
        if frame.name in STAGE_FRAMES and frame.file.endswith(PIPELINE_FILE):
            return STAGE_FRAMES[frame.name]
    return None


def stage_transitions(segments: list[Segment]) -> list[Transition]:
    """Where a Pipeline.<stage> frame appears (B) or disappears (E) in a thread's samples."""
    out: list[Transition] = []
    last_tid: int | None = None
    before: set[str] = set()
    prev_end: int | None = None
    for seg in segments:
        if seg.tid != last_tid:
            last_tid, before, prev_end = seg.tid, set(), None
        elif prev_end is not None and seg.start_us != prev_end:
            before = set()  # a gap: no sample in between
        now = {STAGE_FRAMES[f.name] for f in seg.stack if f.name in STAGE_FRAMES and f.file.endswith(PIPELINE_FILE)}
        for stage in now - before:
            out.append(Transition(stage, "B", seg.start_us, seg.prev_us))
        for stage in before - now:
            out.append(Transition(stage, "E", seg.start_us, seg.prev_us))
        before, prev_end = now, seg.end_us
    return out


class NoClockAnchor(ValueError):
    """No stage transition in the samples pairs with a marker, so py-spy's clock cannot be measured."""

    def __init__(self, why: str) -> None:
        super().__init__(f"{why}: cannot align py-spy's clock")
        self.why = why


@dataclass
class PySpyClock:
    """monotonic ns = ts_us * 1000 + offset(ts_us), offset interpolated between measured points.

    py-spy stamps a sample when its recorder thread handles it, not when the sampler thread took
    it; on a busy host the recorder lags by a varying amount ("N s behind in sampling"), so one
    offset does not fit a whole run. Each stage transition measures the offset at its time.
    """

    points: list[tuple[int, int, int]]
    """(ts_us, offset_ns, half width of its interval in ns), sorted by ts_us."""
    inconsistent: int
    """Points whose transitions' intervals did not intersect (offset = middle of the crossed bounds)."""
    transitions: int = 0
    """Sample times with a stage transition matched to a marker."""
    fallback: str = ""
    """Why no transition could be used, when the offset is py-spy's launch time instead (an estimate)."""

    def offset(self, ts_us: int) -> int:
        times = [p[0] for p in self.points]
        i = bisect.bisect_right(times, ts_us)
        if i == 0:
            return self.points[0][1]
        if i == len(self.points):
            return self.points[-1][1]
        (t0, o0, _), (t1, o1, _) = self.points[i - 1], self.points[i]
        return o0 + round((o1 - o0) * (ts_us - t0) / (t1 - t0))

    def to_mono(self, ts_us: int) -> int:
        return ts_us * 1000 + self.offset(ts_us)

    def to_summary(self) -> dict[str, Any]:
        if self.fallback:
            return {
                "method": "estimate: py-spy's ts 0 taken as the monotonic time just before py-spy was started, "
                "because " + self.fallback + "; py-spy's ts 0 fell between 3 ms before and 47 ms after that "
                "launch time in runs here, so the samples' times are off by as much",
                "mode": "launch-time",
                "offset_ns": self.points[0][1],
                "transitions": 0,
                "points": 1,
                "bound_median_us": None,
                "bound_max_us": None,
            }
        offsets = [p[1] for p in self.points]
        halves = sorted(p[2] for p in self.points)
        return {
            "method": "stage frames (Pipeline.<stage>) appearing/disappearing in the samples vs the stage "
            "markers' monotonic times: a transition puts the offset between (marker - its sample) and "
            "(marker - the sample before); one offset when every interval intersects (bound = half the "
            "intersection), else one per transition, interpolated (the recorder lagged the sampler)",
            "mode": "constant" if len(self.points) == 1 else "interpolated",
            "offset_ns": offsets[0],
            "transitions": self.transitions,
            "points": len(self.points),
            "bound_median_us": halves[len(halves) // 2] / 1000,
            "bound_max_us": halves[-1] / 1000,
            "offset_range_us": (max(offsets) - min(offsets)) / 1000,
            "inconsistent_points": self.inconsistent,
        }


def fit_clock(segments: list[Segment], markers: list[Marker], guess_ns: int | None = None) -> PySpyClock:
    """The clock from stage transitions; where the samples show none that pairs with a marker (a run
    too short for the sampling rate), py-spy's launch time `guess_ns`, labelled as an estimate."""
    try:
        return _clock_from_transitions(segments, markers, guess_ns)
    except NoClockAnchor as exc:
        if guess_ns is None:
            raise
        return PySpyClock([(0, guess_ns, 0)], 0, 0, fallback=exc.why)


def _clock_from_transitions(segments: list[Segment], markers: list[Marker], guess_ns: int | None) -> PySpyClock:
    """Find a coarse offset from the forward stage, pair every transition with its marker, bound the offset."""
    transitions = [t for t in stage_transitions(segments) if t.prev_us is not None]
    marks: dict[tuple[str, str], list[int]] = defaultdict(list)
    for m in markers:
        if m.kind == "stage":
            marks[(m.name, m.phase)].append(m.t_ns)
    coarse = _coarse_offset([t for t in transitions if t.stage == "forward"], marks, guess_ns)
    bounds: dict[int, list[int]] = {}  # ts_us -> [lo, hi]
    for t in transitions:
        assert t.prev_us is not None
        mark = _nearest_mark(marks[(t.stage, t.phase)], t.prev_us * 1000 + coarse, t.ts_us * 1000 + coarse)
        if mark is None:
            continue  # e.g. sample_batch()'s stage frames before warm-up, which have no marker
        lo, hi = mark - t.ts_us * 1000, mark - t.prev_us * 1000
        if t.ts_us in bounds:
            lo, hi = max(lo, bounds[t.ts_us][0]), min(hi, bounds[t.ts_us][1])
        bounds[t.ts_us] = [lo, hi]
    if not bounds:
        raise NoClockAnchor("no stage transition in the samples pairs with a marker")
    lo = max(b[0] for b in bounds.values())
    hi = min(b[1] for b in bounds.values())
    if lo <= hi:  # one offset fits every transition: the recorder kept pace
        return PySpyClock([(min(bounds), (lo + hi) // 2, (hi - lo) // 2)], 0, len(bounds))
    points = [(ts, (lo + hi) // 2, abs(hi - lo) // 2) for ts, (lo, hi) in sorted(bounds.items())]
    return PySpyClock(points, sum(1 for lo, hi in bounds.values() if lo > hi), len(bounds))


def _nearest_mark(key: list[int], lo: int, hi: int) -> int | None:
    """The marker of a stage edge nearest to [lo, hi] (the converted times of the sample before the
    change and of the change), if within PAIR_TOLERANCE_NS. A stage too short to be sampled leaves
    one transition for several markers, all inside that interval: the last one bounds it."""
    i = bisect.bisect_right(key, hi)
    candidates = [key[j] for j in (i - 1, i) if 0 <= j < len(key)]
    if not candidates:
        return None
    mark = min(candidates, key=lambda m: 0 if lo <= m <= hi else min(abs(m - lo), abs(m - hi)))
    distance = 0 if lo <= mark <= hi else min(abs(mark - lo), abs(mark - hi))
    return mark if distance <= PAIR_TOLERANCE_NS else None


def _coarse_offset(forward: list[Transition], marks: dict[tuple[str, str], list[int]], guess_ns: int | None) -> int:
    """The offset consistent with the most forward-stage transitions.

    A transition seen at ts after a sample at prev, paired with a marker m of the same edge, allows
    offsets in [m - ts, m - prev). Sweeping over every (transition, marker) pair finds the offsets
    covered most often. Pipeline.forward frames appear only inside forward markers (sample_batch()
    and the layer table never call it), so the true offset matches them all, while one shifted by k
    iterations loses the k at the ends: the maximum is unique. Ties go to the one nearest the guess.
    """
    edges: list[tuple[int, int]] = []
    for t in forward:
        assert t.prev_us is not None
        for m in marks[("forward", t.phase)]:
            edges.append((m - t.ts_us * 1000, 1))
            edges.append((m - t.prev_us * 1000, -1))
    if not edges:
        raise NoClockAnchor("no forward stage visible in both the samples and the markers")
    edges.sort()
    best: list[tuple[int, int, int]] = []  # (count, start, end)
    count = 0
    for (x, step), (nxt, _) in zip(edges, [*edges[1:], (edges[-1][0], 0)], strict=True):
        count += step
        if nxt > x and count > 0:
            if not best or count > best[0][0]:
                best = [(count, x, nxt)]
            elif count == best[0][0]:
                best.append((count, x, nxt))
    target = guess_ns if guess_ns is not None else (best[0][1] + best[0][2]) // 2
    chosen = min(best, key=lambda b: 0 if b[1] <= target < b[2] else min(abs(target - b[1]), abs(target - b[2])))
    return (chosen[1] + chosen[2]) // 2


# ----------------------------------------------------------------------------- attribution


@dataclass
class Bucket:
    """Sampled time of one stage or layer, by state, function and library."""

    ns: float = 0.0
    states: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    python: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    native: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    libraries: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))

    def add(self, stack: tuple[Frame, ...], ns: float) -> None:
        self.ns += ns
        self.states[leaf_state(stack)] += ns
        py = next((f for f in reversed(stack) if f.is_python), None)
        if py is not None:
            self.python[py.label()] += ns
        if stack and not stack[-1].is_python:
            self.native[stack[-1].label()] += ns
            self.libraries[stack[-1].library] += ns
        elif stack:
            self.libraries["python"] += ns

    def to_dict(self, n_iter: int, unit: str = "ms_per_iter", scale: float = 1e6) -> dict[str, Any]:
        """Weights are ns; unit/scale name and scale the times ("ms_per_iter"/1e6, or "ms"/1e6)."""
        total = self.ns or 1.0

        def top(counter: dict[str, float]) -> list[dict[str, Any]]:
            return [{"function": k, unit: v / scale / n_iter, "share": v / total} for k, v in _most(counter, TOP)]

        return {
            ("sampled_ms_per_iter" if unit == "ms_per_iter" else unit): self.ns / scale / n_iter,
            "shares": {k: v / total for k, v in sorted(self.states.items())},
            "python": top(self.python),
            "native": top(self.native),
            "libraries": {k: v / total for k, v in _most(self.libraries)},
        }


def _most(weights: dict[str, float], n: int | None = None) -> list[tuple[str, float]]:
    return sorted(weights.items(), key=lambda kv: -kv[1])[:n]


def measured_partition(markers: list[Marker]) -> list[tuple[int, int, str | None, str | None, int]]:
    """(start, end, stage, innermost layer, iteration) pieces covering the measured iterations."""
    pieces: list[tuple[int, int, str | None, str | None, int]] = []
    stage: str | None = None
    layers: list[str] = []
    inside = False
    iteration = -1
    last_t: int | None = None
    for m in markers:
        if inside and last_t is not None and m.t_ns > last_t:
            pieces.append((last_t, m.t_ns, stage, layers[-1] if layers else None, iteration))
        last_t = m.t_ns
        if m.kind == "iteration":
            inside = m.phase == "B" and not m.warmup
            iteration = m.iteration
            stage, layers = None, []
        elif m.kind == "stage":
            stage = m.name if m.phase == "B" else None
        elif m.kind == "layer":
            if m.phase == "B":
                layers.append(m.name)
            elif layers and layers[-1] == m.name:
                layers.pop()
    return pieces


@dataclass
class Converted:
    spans: list[Span]
    threads: list[ThreadName]
    metrics: MetricTables
    hotspots: dict[str, Any]
    summary: dict[str, Any]


def convert_chrometrace(path: Path, markers: list[Marker], rate: int, launched_ns: int | None = None) -> Converted:
    segments, threads = load_chrometrace(path)
    if not segments:
        raise ValueError(f"{path}: no samples")
    clock = fit_clock(segments, markers, launched_ns)
    pieces = measured_partition(markers)
    starts = [p[0] for p in pieces]
    n_iter = max(len({p[4] for p in pieces}), 1)
    main_key = _main_thread(segments, threads)
    stages: dict[str, Bucket] = defaultdict(Bucket)
    layers: dict[str, Bucket] = defaultdict(Bucket)
    per_thread: dict[str, Bucket] = defaultdict(Bucket)
    window = (pieces[0][0], pieces[-1][1]) if pieces else (0, 0)
    whole = Bucket()
    kept: list[Segment] = []
    agreement = [0, 0]  # samples (at stack changes) whose converted time lies in the stage their stack shows
    for seg in segments:
        s = clock.to_mono(seg.start_us)
        e = clock.to_mono(seg.end_us)
        if e <= window[0] or s >= window[1]:
            continue
        kept.append(seg)
        thread = threads[seg.tid]
        per_thread[f"{thread.os_tid or seg.tid} {thread.name}".strip()].add(
            seg.stack, min(e, window[1]) - max(s, window[0])
        )
        if seg.tid != main_key:
            continue
        from_stack = _stage_of(seg.stack)
        i = max(bisect.bisect_right(starts, s) - 1, 0)
        if from_stack is not None and pieces[i][0] <= s < pieces[i][1]:  # the sample at the change
            agreement[0] += pieces[i][2] == from_stack
            agreement[1] += 1
        while i < len(pieces) and pieces[i][0] < e:
            p0, p1, by_time, layer, _ = pieces[i]
            overlap = min(e, p1) - max(s, p0)
            i += 1
            if overlap <= 0:
                continue
            whole.add(seg.stack, overlap)
            stages[from_stack or by_time or "between stages"].add(seg.stack, overlap)
            if layer is not None and by_time == "forward" and from_stack in ("forward", None):
                layers[layer].add(seg.stack, overlap)
    metrics = MetricTables(
        layers={k: _metric_row(b, n_iter) for k, b in layers.items()},
        stages={k: _metric_row(b, n_iter) for k, b in stages.items()},
        units={
            "pyspy_ms": "ms",
            "pyspy_python_share": "fraction",
            "pyspy_native_share": "fraction",
            "pyspy_waiting_share": "fraction",
        },
        methods={
            "pyspy_ms": f"py-spy sampled time of the main thread at {rate} Hz, mean per measured iteration "
            "(estimate: sampling); the stage from the sample's Pipeline.<stage> frame, the layer by overlap "
            "of the converted time with the layer spans",
            "pyspy_waiting_share": "leaf frame in libgomp or a known blocking call (heuristic)",
            "pyspy_python_share": "leaf frame is a Python frame",
            "pyspy_native_share": "leaf frame is native code, outside the OpenMP runtime and known waits",
        },
    )
    hotspots = {
        "iterations": n_iter,
        "rate_hz": rate,
        "main_thread": _thread_label(threads[main_key]) if main_key is not None else None,
        "measured": whole.to_dict(n_iter),
        "stages": {k: b.to_dict(n_iter) for k, b in stages.items()},
        "layers": {k: b.to_dict(n_iter) for k, b in layers.items()},
        "threads": {k: b.to_dict(n_iter) for k, b in per_thread.items()},
    }
    summary: dict[str, Any] = {
        "format": "chrometrace",
        "segments": len(segments),
        "threads": len(threads),
        "estimated_samples_measured": round(whole.ns / 1e9 * rate),
        "measured_ms": (window[1] - window[0]) / 1e6,
        "shares_measured": {k: v / (whole.ns or 1) for k, v in sorted(whole.states.items())},
        "top_libraries": {k: v / (whole.ns or 1) for k, v in _most(whole.libraries, 6)},
        "clock": clock.to_summary(),
    }
    if agreement[1]:
        summary["clock"]["stage_agreement"] = agreement[0] / agreement[1]
    if launched_ns is not None and not clock.fallback:
        summary["clock"]["launch_lag_ms"] = (clock.points[0][1] - launched_ns) / 1e6
    return Converted(_frame_spans(kept, threads, clock), _thread_names(threads), metrics, hotspots, summary)


def _metric_row(bucket: Bucket, n_iter: int) -> dict[str, float]:
    total = bucket.ns or 1.0
    return {
        "pyspy_ms": bucket.ns / 1e6 / n_iter,
        "pyspy_python_share": bucket.states["python"] / total,
        "pyspy_native_share": bucket.states["native"] / total,
        "pyspy_waiting_share": bucket.states["waiting"] / total,
    }


def _main_thread(segments: list[Segment], threads: dict[int, ThreadInfo]) -> int | None:
    for key, info in threads.items():
        if info.name == "MainThread":
            return key
    counts = Counter(s.tid for s in segments)
    return counts.most_common(1)[0][0] if counts else None


def _thread_label(info: ThreadInfo) -> str:
    return f"{info.os_tid or info.key} {info.name}".strip()


def _thread_names(threads: dict[int, ThreadInfo]) -> list[ThreadName]:
    return [ThreadName(t.os_tid, t.name) for t in threads.values() if t.os_tid is not None and t.name]


def _frame_spans(segments: list[Segment], threads: dict[int, ThreadInfo], clock: PySpyClock) -> list[Span]:
    """The samples as a flame chart: one span per frame per run of samples that kept it."""
    spans: list[Span] = []
    by_tid: dict[int, list[Segment]] = defaultdict(list)
    for seg in segments:
        by_tid[seg.tid].append(seg)
    for key, segs in by_tid.items():
        os_tid = threads[key].os_tid or key
        track = f"py-spy:{os_tid}"
        open_: list[tuple[Frame, int]] = []
        last_end = None
        for seg in segs:
            if last_end is not None and seg.start_us != last_end:
                for frame, start in open_:
                    spans.append(_frame_span(frame, start, last_end, track, os_tid, clock))
                open_ = []
            common = 0
            while common < min(len(open_), len(seg.stack)) and open_[common][0] == seg.stack[common]:
                common += 1
            for frame, start in reversed(open_[common:]):
                spans.append(_frame_span(frame, start, seg.start_us, track, os_tid, clock))
            open_ = open_[:common] + [(f, seg.start_us) for f in seg.stack[common:]]
            last_end = seg.end_us
        for frame, start in reversed(open_):
            if last_end is not None:
                spans.append(_frame_span(frame, start, last_end, track, os_tid, clock))
    spans.sort(key=lambda s: (s.track, s.ts_ns, -s.dur_ns))
    return spans


def _frame_span(frame: Frame, start_us: int, end_us: int, track: str, tid: int, clock: PySpyClock) -> Span:
    start = clock.to_mono(start_us)
    args: dict[str, Any] = (
        {"library": frame.library} if not frame.is_python else {"file": frame.file, "line": frame.line}
    )
    return Span(frame.name, start, clock.to_mono(end_us) - start, track, "py-spy", tid, args)


# ----------------------------------------------------------------------------- speedscope


def convert_speedscope(path: Path) -> Converted:
    """Hot functions and shares of a speedscope file: it has no timestamps, so no stage or layer."""
    with _open_text(path) as handle:
        doc = json.load(handle)
    if "shared" not in doc or "profiles" not in doc:
        raise ValueError(f"{path}: not a speedscope file")
    frames = [
        Frame(str(f.get("name", "")), str(f.get("file", "")), int(f.get("line") or 0)) for f in doc["shared"]["frames"]
    ]
    per_thread: dict[str, Bucket] = defaultdict(Bucket)
    whole = Bucket()
    samples = 0
    for profile in doc["profiles"]:
        if profile.get("type") != "sampled":
            continue
        to_ns = SPEEDSCOPE_UNITS_NS.get(str(profile.get("unit", "none")))
        if to_ns is None:
            raise ValueError(f"{path}: speedscope weights in {profile.get('unit')!r}, not a time unit")
        name = str(profile.get("name", ""))
        for stack_ids, weight in zip(profile["samples"], profile["weights"], strict=True):
            stack = tuple(frames[i] for i in stack_ids)
            if stack and THREAD_FRAME.match(stack[0].name) and not stack[0].file:
                stack = stack[1:]
            per_thread[name].add(stack, float(weight) * to_ns)
            whole.add(stack, float(weight) * to_ns)
            samples += 1
    hotspots = {
        "iterations": None,
        "measured": whole.to_dict(1, "ms", 1e6),
        "threads": {k: b.to_dict(1, "ms", 1e6) for k, b in per_thread.items()},
        "note": "speedscope carries no timestamps: whole-process sampled time, no stage or layer",
    }
    summary = {
        "format": "speedscope",
        "samples": samples,
        "sampled_ms": whole.ns / 1e6,
        "threads": len(per_thread),
        "shares_whole_process": {k: v / (whole.ns or 1) for k, v in sorted(whole.states.items())},
        "top_libraries": {k: v / (whole.ns or 1) for k, v in _most(whole.libraries, 6)},
        "clock": {"unavailable": "speedscope carries no timestamps: no stage/layer attribution, no alignment"},
    }
    return Converted([], [], MetricTables(), hotspots, summary)


def write_outputs(out_dir: Path, converted: Converted) -> list[str]:
    names = []
    if converted.spans or converted.threads:
        write_records(records_path(out_dir, NAME), [*converted.threads, *converted.spans])
        names.append(records_path(out_dir, NAME).name)
    if converted.metrics.layers or converted.metrics.stages:
        converted.metrics.save(metrics_path(out_dir, NAME))
        names.append(metrics_path(out_dir, NAME).name)
    (out_dir / f"{NAME}.hotspots.json").write_text(json.dumps(converted.hotspots, indent=1))
    names.append(f"{NAME}.hotspots.json")
    return names
