"""Linux perf sampling in the kernels pass: the native kernel every thread ran, per stage and layer.

The parent attaches `perf record -p PID -k CLOCK_MONOTONIC` to the kernels pass's worker right
after spawning it (as py-spy is attached to the trace pass). The worker carries the layer markers
and nothing else in-process, so the only disturbance is perf's own sampling interrupt. perf
follows every thread of the worker, including torch's OpenMP pool created later (inherit), and
stamps samples on CLOCK_MONOTONIC, the clock of the markers: no alignment is needed, a sample's
time says which stage and layer was running (hwprof.analysis.kernels) and its instruction
pointer says which kernel (_perf_script). oneDNN names its JIT kernels for perf when
ONEDNN_JIT_PROFILE=2 is in the worker's environment as it loads (child_env).

Events. Where the PMU is exposed, perf samples on cycles and reads a group with it (instructions,
cache-misses and the hardware events of --events) at every sample, so every kernel in every
layer gets CPI and misses per kilo-instruction. Where it is not (virtual machines without a vPMU,
such as the ones this is developed on), it samples on cpu-clock and says CPI per kernel is
unavailable, why, and the fix. Without root and with perf_event_paranoid >= 2 only user space
can be sampled (`:u`): kernel-space time then goes unseen, which the summary says.

Only the measured iterations are sampled: perf starts with its events disabled (`-D -1`) and a
control FIFO pair in the pass folder (`--control fifo:perf.ctl,perf.ack`); the worker's side of
this collector enables them in start(), after the warm-up, and disables them in stop(), and around
each clean iteration of the paired pass (pause/resume, hwprof.paired). Model build and warm-up then
cost nothing, and perf.data holds only what the report uses.

Rate and iterations. By default both are planned from the clean timing pass's forward p50 so that
a layer at 1% of forward collects at least 50 samples (hwprof.analysis.kernels): the rate within
[MIN_AUTO_RATE, MAX_AUTO_RATE] (each sample costs a timer interrupt), and for a short forward
more measured iterations in this pass than --iters (plan_sampling). --perf-rate sets the rate
and keeps --iters.
"""

from __future__ import annotations

import functools
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwprof.collectors._perf_control import (
    AttachOnRequest,
    PerfControl,
    disable,
    enable,
    make_fifos,
    remove_fifos,
    request_attach,
)
from hwprof.collectors.base import AttachedTool, Capability, Collector, CollectorResult, PassContext

if TYPE_CHECKING:
    from hwprof.config import RunConfig

NAME = "perf_sampling"
DEFAULT_RATE = 1000
"""Without a timing pass to size it from."""
MIN_AUTO_RATE = 250
MAX_AUTO_RATE = 500
"""At 35-45 us per sample (plan_sampling) 1 kHz cost yolov7-tiny at 320 about 6% of its forward
(the pass's own paired figure, 1.06 over 76 ABBA blocks); 500 Hz halves that, for twice the
iterations on a short forward."""
RATE_MARGIN = 1.3
MAX_PASS_S = 60.0
"""The most forward time the auto plan gives the kernels pass's measured iterations."""
PMU_GROUP = ("cycles", "instructions", "cache-misses")
PERMISSION_WORDS = ("permission", "not permitted", "paranoid", "eacces", "eperm", "access to performance monitoring")
INSTALL_FIX = (
    "install Linux perf: Debian `sudo apt-get install linux-perf`, Ubuntu `sudo apt-get install "
    "linux-tools-common linux-tools-$(uname -r)`, Fedora `sudo dnf install perf`"
)
CPI_PART = "CPI and MPKI per kernel"
NO_PMU_REASON = "this host exposes no hardware PMU to perf (`perf stat -e cycles true` says <not supported>)"
NO_PMU_FIX = (
    "run on bare metal, or on a VM with a virtual PMU (KVM/libvirt `<cpu mode='host-passthrough'>` with "
    "`<pmu state='on'/>`; AWS: a whole-host .metal instance); then `perf stat -e cycles,instructions true` counts"
)


def perf_binary(config: RunConfig) -> str | None:
    explicit = config.extra.get("perf_path")
    if explicit:
        return str(explicit) if Path(explicit).is_file() and os.access(explicit, os.X_OK) else None
    return shutil.which("perf")


def paranoid_level() -> int | None:
    try:
        return int(Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip())
    except (OSError, ValueError):
        return None


def user_only() -> bool:
    """Unprivileged perf at paranoid >= 2 may sample user space only."""
    level = paranoid_level()
    return os.geteuid() != 0 and level is not None and level >= 2


def permission_fix() -> str:
    return "sudo sysctl -w kernel.perf_event_paranoid=1 (or run hwprof as root, or grant CAP_PERFMON)"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def pmu_status(binary: str) -> tuple[bool, str]:
    """Whether `perf stat -e instructions,cycles true` counts, and perf's words when it does not."""
    try:
        done = subprocess.run(
            [binary, "stat", "-x", ",", "-e", "cycles,instructions", "true"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"perf stat could not run: {exc}"
    rows = [line.split(",") for line in done.stderr.splitlines() if line.count(",") >= 2]
    counted = {r[2].split(":")[0] for r in rows if r[0].strip().isdigit()}
    if {"cycles", "instructions"} <= counted:
        return True, ""
    return False, NO_PMU_REASON


@functools.cache
def _probe(binary: str) -> Capability:
    """A real `perf record` of a short child on CLOCK_MONOTONIC, and whether cycles count."""
    suffix = ":u" if user_only() else ""
    with tempfile.TemporaryDirectory(prefix="hwprof-perf-probe-") as tmp:
        out = Path(tmp) / "probe.data"
        command = [binary, "record", "-q", "-e", f"cpu-clock{suffix}", "-k", "CLOCK_MONOTONIC", "-F", "999"]
        command += ["-o", str(out), "--", sys.executable, "-c", "sum(range(10**6))"]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Capability.unavailable(f"perf record could not run: {exc}", INSTALL_FIX)
        text = done.stdout + done.stderr
        if done.returncode != 0 or not out.exists():
            last = _last_line(text) or f"exit status {done.returncode}"
            if any(w in text.lower() for w in PERMISSION_WORDS):
                level = paranoid_level()
                return Capability.unavailable(
                    f"perf may not sample here (perf_event_paranoid={level}): {last}", permission_fix()
                )
            if "not found for kernel" in text or "perf not found" in text:
                return Capability.unavailable(f"perf is installed for another kernel: {last}", INSTALL_FIX)
            return Capability.unavailable(f"perf record of a test process failed: {last}", INSTALL_FIX)
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()
    pmu, why = pmu_status(binary)
    details: dict[str, Any] = {"binary": binary, "version": version, "pmu": pmu, "user_only": bool(suffix)}
    unavailable: dict[str, dict[str, str]] = {}
    if not pmu:
        unavailable[CPI_PART] = {"reason": why, "fix": NO_PMU_FIX}
    if suffix:
        level = paranoid_level()
        unavailable["kernel-space samples"] = {
            "reason": f"perf_event_paranoid={level} without root",
            "fix": permission_fix(),
        }
    if unavailable:
        details["unavailable"] = unavailable
    return Capability.ok(**details)


def timing_forward_s(run_dir: Path) -> float | None:
    """The clean timing pass's forward p50, if it ran before this pass."""
    from hwprof.analysis.spans import forward_p50, measured_spans
    from hwprof.workload.markers import read_markers

    path = run_dir / "passes" / "timing" / "markers.jsonl"
    if not path.exists():
        return None
    p50 = forward_p50(measured_spans(read_markers(path)))
    return p50 / 1e3 if p50 else None


def max_sample_rate() -> int:
    try:
        return int(Path("/proc/sys/kernel/perf_event_max_sample_rate").read_text().strip())
    except (OSError, ValueError):
        return MAX_AUTO_RATE


@dataclass(frozen=True)
class SamplingPlan:
    rate: int
    """Samples/s per thread."""
    iterations: int
    """Measured iterations of the kernels pass."""
    how: str


def plan_sampling(config: RunConfig, forward_s: float | None) -> SamplingPlan:
    """Rate and iterations for MIN_LAYER_SAMPLES samples in a layer at MIN_LAYER_SHARE of forward.

    The cost of sampling grows with the rate (each sample is a timer interrupt: about 35-45 us on
    this project's VMs, i.e. ~4% of a CPU at 1 kHz, 12% at 4 kHz, 25% at 6.7 kHz on yolov7-tiny),
    while more iterations cost only time. So the rate stays at or under MAX_AUTO_RATE and a
    short forward gets more measured iterations instead, up to MAX_PASS_S of forward.
    """
    from hwprof.analysis.kernels import MIN_LAYER_SAMPLES, MIN_LAYER_SHARE

    ceiling = max_sample_rate()
    if config.perf_rate:
        return SamplingPlan(min(config.perf_rate, ceiling), config.iters, "--perf-rate")
    if not forward_s:
        return SamplingPlan(min(DEFAULT_RATE, ceiling), config.iters, "default (no timing pass to size it from)")
    sample_iterations = RATE_MARGIN * MIN_LAYER_SAMPLES / (MIN_LAYER_SHARE * forward_s)
    rate = min(max(math.ceil(sample_iterations / config.iters), MIN_AUTO_RATE), MAX_AUTO_RATE, ceiling)
    iterations = max(config.iters, math.ceil(sample_iterations / rate))
    iterations = min(iterations, max(config.iters, int(MAX_PASS_S / forward_s)))
    how = (
        f"auto: {MIN_LAYER_SAMPLES} samples (x{RATE_MARGIN} margin) for a layer at {MIN_LAYER_SHARE:.0%} of the "
        f"timing pass's forward ({forward_s * 1e3:.1f} ms): {rate} Hz (within [{MIN_AUTO_RATE}, {MAX_AUTO_RATE}]: "
        f"sampling costs per sample) over {iterations} iterations (at least --iters, at most {MAX_PASS_S:.0f} s)"
    )
    return SamplingPlan(int(rate), int(iterations), how)


SOFTWARE_EVENTS = frozenset(
    {"task-clock", "page-faults", "minor-faults", "major-faults", "context-switches", "cpu-migrations"}
)


def sampling_events(config: RunConfig, capability: Capability) -> list[str]:
    """The event of `perf record -e`: cycles leading a group read at each sample where the PMU
    exists (instructions, cache-misses, and the events of --events), else cpu-clock, leading a
    group of the software events of --events if any."""
    suffix = ":u" if capability.details.get("user_only") else ""
    pmu = bool(capability.details.get("pmu"))
    leader = "cycles" if pmu else "cpu-clock"
    members = list(PMU_GROUP[1:]) if pmu else []
    for event in config.events:
        usable = pmu or event in SOFTWARE_EVENTS
        if usable and event != leader and event not in members and ":" not in event and "/" not in event:
            members.append(event)
    if not members:
        return [f"{leader}{suffix}"]
    return ["{" + ",".join(f"{e}{suffix}" for e in (leader, *members)) + "}:S"]


class PerfSamplingCollector(Collector):
    name = NAME
    title = "Linux perf sampling: native kernels per layer on every thread"
    pass_name = "kernels"
    needs_layer_markers = True
    switchable = True

    @classmethod
    def probe(cls, config: RunConfig) -> Capability:
        binary = perf_binary(config)
        if binary is None:
            where = config.extra.get("perf_path") or "PATH"
            return Capability.unavailable(f"perf not found ({where})", INSTALL_FIX)
        return _probe(binary)

    def child_env(self, ctx: PassContext) -> dict[str, str]:
        return {"ONEDNN_JIT_PROFILE": "2"}

    def measured_iterations(self, ctx: PassContext) -> int | None:
        return plan_sampling(self.config, timing_forward_s(ctx.run_dir)).iterations

    def start(self, ctx: PassContext) -> None:
        request_attach(ctx.out_dir)

    def stop(self, ctx: PassContext) -> None:
        disable(ctx.out_dir)

    def pause(self, ctx: PassContext) -> None:
        disable(ctx.out_dir)

    def resume(self, ctx: PassContext) -> None:
        enable(ctx.out_dir)

    def close(self, ctx: PassContext) -> CollectorResult:
        return CollectorResult(
            "skipped", reason="perf runs in the parent: its result is what attach().finish() returns"
        )

    def attach(self, pid: int, ctx: PassContext) -> AttachedTool | None:
        binary = perf_binary(self.config)
        capability = self.probe(self.config)
        if binary is None or not capability.available:
            raise FileNotFoundError(capability.sentence())
        return PerfRecordTool(binary, pid, ctx, capability)


COLLECTOR = PerfSamplingCollector


class PerfRecordTool(AttachedTool):
    """perf record, launched when the worker asks (see _perf_control), and its conversion at the end."""

    def __init__(self, binary: str, pid: int, ctx: PassContext, capability: Capability) -> None:
        self.binary = binary
        self.pid = pid
        self.ctx = ctx
        self.capability = capability
        config = ctx.config
        self.forward_s = timing_forward_s(ctx.run_dir)
        plan = plan_sampling(config, self.forward_s)
        self.rate, self.rate_how = plan.rate, plan.how
        self.events = sampling_events(config, capability)
        self.data = ctx.out_dir / "perf.data"
        self.data.unlink(missing_ok=True)
        self.log = ctx.out_dir / f"{NAME}.log"
        ctx.out_dir.mkdir(parents=True, exist_ok=True)
        ctl, ack = (str(p) for p in make_fifos(ctx.out_dir)[:2])
        self.command = [binary, "record", "-k", "CLOCK_MONOTONIC", "--sample-cpu", "-F", str(self.rate), "-p", str(pid)]
        for event in self.events:
            self.command += ["-e", event]
        self.command += ["-D", "-1", "--control", f"fifo:{ctl},{ack}", "-o", str(self.data)]
        self.process: subprocess.Popen[bytes] | None = None
        self.attach_ms: float | None = None
        self._log_handle = open(self.log, "w")  # noqa: SIM115 - perf writes to it until finish()
        self.server = AttachOnRequest(ctx.out_dir, self._launch)

    def _launch(self) -> bool:
        """Start perf on the worker and enable its events; True once perf acknowledged."""
        started = time.monotonic()
        self.process = subprocess.Popen(self.command, stdout=self._log_handle, stderr=subprocess.STDOUT)
        process = self.process
        control = PerfControl.wait_for(self.ctx.out_dir, lambda: process.poll() is None)
        if control is None:
            return False
        try:
            enabled = control.send("enable")
        finally:
            control.close()
        self.attach_ms = (time.monotonic() - started) * 1e3
        return enabled

    def finish(self, worker_returncode: int | None, timeout_s: float = 60.0) -> CollectorResult:
        from hwprof.collectors._perf_report import convert

        self.server.cancel()
        if self.process is None:
            self._log_handle.close()
            remove_fifos(self.ctx.out_dir)
            return CollectorResult(
                "failed",
                reason="the worker never reached its measured iterations, so perf was never attached",
                artifacts=[self.ctx.relpath(self.log)],
            )
        returncode = _wait_or_stop(self.process, timeout_s)
        self._log_handle.close()
        remove_fifos(self.ctx.out_dir)
        log_text = self.log.read_text(errors="replace") if self.log.exists() else ""
        artifacts = [self.ctx.relpath(self.log)]
        if not self.data.exists() or self.data.stat().st_size == 0:
            why = f"perf record exited with status {returncode} and wrote no samples: {_last_line(log_text)}"
            fix = permission_fix() if any(w in log_text.lower() for w in PERMISSION_WORDS) else ""
            return CollectorResult("failed", reason=why, fix=fix, artifacts=artifacts)
        artifacts.append(self.ctx.relpath(self.data))
        jit_map = Path(f"/tmp/perf-{self.pid}.map")
        if jit_map.exists():
            shutil.copy(jit_map, self.ctx.out_dir / jit_map.name)
            artifacts.append(self.ctx.relpath(self.ctx.out_dir / jit_map.name))
        try:
            converted = convert(self.binary, self.data, self.ctx.out_dir, self.rate, self.pid)
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            return CollectorResult("failed", reason=f"perf output could not be converted: {exc}", artifacts=artifacts)
        artifacts += [self.ctx.relpath(self.ctx.out_dir / name) for name in converted.files]
        summary = converted.summary
        summary.update(
            command=" ".join(self.command),
            returncode=returncode,
            rate_hz=self.rate,
            rate_chosen=self.rate_how,
            events=self.events,
            version=self.capability.details.get("version", ""),
            jit_perf_map=jit_map.exists(),
            attach_ms=self.attach_ms,
        )
        if self.capability.details.get("user_only"):
            summary["kernel_space"] = "not sampled: user space only (perf_event_paranoid >= 2 without root)"
        cpi = self.capability.details.get("unavailable", {}).get(CPI_PART)
        if cpi:
            summary["cpi_per_kernel"] = {"status": "unavailable", **cpi}
        status, reason, fix = "ok", "", ""
        if returncode not in (0, -signal.SIGINT, 130) and returncode is not None:
            status, reason = "partial", f"perf record exited with status {returncode}: {_last_line(log_text)}"
        if summary.get("samples_measured", 0) == 0:
            status = "partial"
            reason = "no sample fell inside the measured iterations"
            fix = "raise --iters or --perf-rate"
        if worker_returncode not in (0, None) and status == "ok":
            status, reason = "partial", f"the worker exited with status {worker_returncode}"
        return CollectorResult(status, reason=reason, fix=fix, summary=summary, artifacts=artifacts)


def _wait_or_stop(process: subprocess.Popen[bytes], timeout_s: float) -> int:
    """perf record -p exits with its target; if it does not, SIGINT makes it write what it has."""
    try:
        return process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT)
        try:
            return process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait()
