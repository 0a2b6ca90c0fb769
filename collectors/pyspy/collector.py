"""py-spy attached to the trace pass's worker: sampled Python stacks, per stage and layer.

The parent runs the real `py-spy record -p PID --threads --idle -r RATE --format chrometrace
--nonblocking` right after spawning the worker; py-spy exits when the worker exits, and finish()
converts its samples (parse.py reads them, clock.py puts them on CLOCK_MONOTONIC,
attribution.py splits them over stages, layers and threads and writes the files). The
in-process part of this collector stops py-spy (SIGSTOP) in the paired pass's clean iterations and
continues it after them (switch.py), so that the trace pass's paired cost covers py-spy.

Native frames are off by default: native kernels on every thread come from perf's kernels pass
(perf_sampling), which needs neither stacks nor pauses. `--pyspy-native` (RunConfig.pyspy_native)
switches py-spy to `--native`, which unwinds native stacks too but only in py-spy's blocking mode:
it stops every thread of the worker for each sample (py-spy refuses --native with
--nonblocking).

Which collectors may share a pass, and why:
- torch_profiler + pyspy share the trace pass: py-spy reads the worker's memory from outside and
  sees the profiler's own frames (record_function calls) as a small Python cost. Their overheads
  add up, which the trace pass's forward p50 over the timing pass's shows
  (scripts/bench_trace_overhead.py measures each alone and both together).
- py-spy with --native stops every thread of the worker for each sample, which stretches layer
  times and perturbs OpenMP barriers: it must not share a pass with the per-layer counters or the
  clean timing pass. The default --nonblocking reads the worker's memory while it runs (a stack
  may then be torn, which py-spy counts as an error). Attached to a yolov7-tiny forward loop at
  320 in blocks, at 50 Hz on a 2-core host: --nonblocking used 4% of a core and the forward p50
  was 1.05x without py-spy; --native used 54% of a core, 1.18x.
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

import contextlib
import functools
import gzip
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from hwprof.collectors.base import AttachedTool, Capability, Collector, CollectorResult, PassContext, unconverted
from hwprof.collectors.pyspy.attribution import NAME, convert_chrometrace, convert_speedscope, write_outputs
from hwprof.collectors.pyspy.switch import PySpySwitch, summary_fields, write_pid

from hwprof.core.atomic import atomic_path
from hwprof.core.markers import read_markers
from hwprof.core.program_spec import PROGRAM_SPAN
from hwprof.schema.codec import need
from hwprof.schema.probes import PyspyProbe

if TYPE_CHECKING:
    from hwprof.core.config import RunConfig

NATIVE_OFF = (
    "native frames are off by default (py-spy --nonblocking, no pauses): collect with --pyspy-native for "
    "py-spy's native stacks (blocking: it pauses every thread per sample); perf's kernels pass names the "
    "native kernels on every thread"
)
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


def record_command(binary: str, pid: int, config: RunConfig, fmt: str, out: Path) -> list[str]:
    """The `py-spy record` command line the trace pass attaches to the worker `pid` with."""
    command = [binary, "record", "-p", str(pid), "--threads", "--idle", "-r", str(config.pyspy_rate)]
    command += ["--format", fmt, "-o", str(out)]
    return command + (["--native"] if config.pyspy_native else ["--nonblocking"])


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
        return Capability.ok(details=PyspyProbe.of(binary=binary, version=version))
    last = text.splitlines()[-1] if text else f"exit status {done.returncode}"
    if any(word in text.lower() for word in PERMISSION_WORDS):
        return Capability.unavailable(f"py-spy may not read another process: {last}", _ptrace_fix())
    return Capability.unavailable(f"py-spy dump of a test process failed: {last}", "pip install --upgrade py-spy")


# ----------------------------------------------------------------------------- collector


class PySpyCollector(Collector):
    name = NAME
    title = "py-spy sampling profiler (Python stacks; native with --pyspy-native)"
    pass_name = "trace"
    whole_process = True

    @classmethod
    def probe(cls, config: RunConfig) -> Capability:
        binary = pyspy_binary(config)
        if binary is None:
            where = config.extra.get("pyspy_path") or "PATH or beside the Python interpreter"
            return Capability.unavailable(f"py-spy binary not found ({where})", "pip install py-spy")
        return _probe(binary)

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self._switch: PySpySwitch | None = None

    @property
    def switchable(self) -> bool:
        """Stopped in the clean iterations (switch.py), except with --pyspy-native, whose py-spy holds
        the worker's threads stopped while it samples, and with extra.pyspy_switch false (the method before
        issue 29, for scripts/bench_attributing_passes.py)."""
        return not self.config.pyspy_native and self.config.extra.get("pyspy_switch", True) is not False

    def pause(self, ctx: PassContext) -> None:
        if self._switch is None:
            self._switch = PySpySwitch(ctx.out_dir)
        self._switch.stop()

    def resume(self, ctx: PassContext) -> None:
        if self._switch is not None:
            self._switch.cont()

    def close(self, ctx: PassContext) -> CollectorResult:
        if self._switch is not None:  # never leave py-spy stopped: continued before anything else
            self._switch.save()
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
        self.native = config.pyspy_native
        self.raw = ctx.out_dir / f"{NAME}.{fmt}.json"
        self.raw.unlink(missing_ok=True)  # never convert a file left by an earlier run
        self.log = ctx.out_dir / f"{NAME}.log"
        self.command = record_command(binary, pid, config, fmt, self.raw)
        ctx.out_dir.mkdir(parents=True, exist_ok=True)
        self._log_handle = open(self.log, "w")  # noqa: SIM115 - py-spy writes to it until finish()
        self.launched_ns = time.monotonic_ns()
        self.process = subprocess.Popen(self.command, stdout=self._log_handle, stderr=subprocess.STDOUT)
        write_pid(ctx.out_dir, self.process.pid)  # the worker stops it in clean iterations (switch.py)

    def abandon(self) -> None:
        self.process.wait()  # killed already
        self._log_handle.close()

    def finish(self, worker_returncode: int | None, timeout_s: float = 30.0) -> CollectorResult:
        with contextlib.suppress(ProcessLookupError):  # a worker killed while py-spy was stopped
            self.process.send_signal(signal.SIGCONT)
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
            why = f"py-spy output could not be converted: {exc}"
            return unconverted(self.ctx, self.raw, "py-spy's output", why, artifacts)
        gz = self.raw.with_suffix(".json.gz")
        with atomic_path(gz) as tmp, open(self.raw, "rb") as src, gzip.open(tmp, "wb", compresslevel=6) as dst:
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
            **summary_fields(self.ctx.out_dir, self.ctx.config.pyspy_rate),
        )
        if not self.native:
            summary.native_off = NATIVE_OFF
        launch_time = need(summary.clock).get("mode") == "launch-time"  # speedscope: no mode
        status, reason, fix = _outcome(returncode, log_text, launch_time and not _whole_program(self.ctx.out_dir))
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


def _whole_program(out_dir: Path) -> bool:
    """The pass profiled a program's whole run as one span (no model: hwprof.session.program_pass_runner): the launch
    time's tens of ms are nothing beside it, and no stage or layer is attributed."""
    markers_file = out_dir / "markers.jsonl"
    stages = {m.name for m in read_markers(markers_file) if m.kind == "stage"} if markers_file.exists() else set()
    return stages == {PROGRAM_SPAN}


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "no output"


def _samples_reported(text: str) -> int | None:
    found = re.findall(r"Samples: (\d+)", text)
    return int(found[-1]) if found else None


def _sample_errors(text: str) -> int | None:
    found = re.findall(r"Errors: (\d+)", text)
    return int(found[-1]) if found else None


def _outcome(returncode: int, log_text: str, clock_estimated: bool) -> tuple[str, str, str]:
    """(status, reason, fix) of a py-spy run that wrote samples: partial where py-spy failed, or where its samples'
    times are only estimated from its launch time (too few samples to see a forward stage's edges)."""
    if returncode != 0:
        return "partial", f"py-spy exited with status {returncode}: {_last_line(log_text)}", ""
    if clock_estimated:
        return (
            "partial",
            "too few samples to see a forward stage begin or end: the samples' times are estimated from py-spy's "
            "launch time (tens of ms off), so their layer attribution is unreliable",
            "raise --iters or --pyspy-rate so that several samples fall in each forward stage",
        )
    return "ok", "", ""
