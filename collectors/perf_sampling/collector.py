"""Linux perf sampling in the kernels pass: the native kernel every thread ran, per stage and layer.

The parent attaches `perf record -p PID -k CLOCK_MONOTONIC` to the kernels pass's worker right
after spawning it (as py-spy is attached to the trace pass). The worker carries the layer markers
and nothing else in-process, so the only disturbance is perf's own sampling interrupt. perf
follows every thread of the worker, including torch's OpenMP pool created later (inherit), and
stamps samples on CLOCK_MONOTONIC, the clock of the markers: no alignment is needed, a sample's
time says which stage and layer was running (hwprof.core.kernels) and its instruction
pointer says which kernel (script.py). oneDNN names its JIT kernels for perf when
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
each clean iteration of the paired pass (pause/resume, hwprof.session.paired). Model build and warm-up then
cost nothing, and perf.data holds only what the report uses.

Callchains. perf records each sample's callchain by frame pointers (--call-graph fp; off with
config.extra["perf_callchains"] = False, for measuring what they cost: scripts/bench_kernels_overhead.py
--callchains both). The kernel's frames are reliable with fp, and say why a thread was in the kernel
(a page fault, a syscall, an IPI: hwprof.core.kernel_causes); the user frames of torch, built
without frame pointers, are not, and are not used. A sample is still charged to its leaf.

Rate and iterations. By default both are planned from the clean timing pass's forward p50 so that
a layer at 1% of forward collects at least 50 samples (hwprof.core.kernels): the rate within
[MIN_AUTO_RATE, MAX_AUTO_RATE] (each sample costs a timer interrupt), and for a short forward
more measured iterations in this pass than --iters (plan_sampling). --perf-rate sets the rate
and keeps --iters.
"""

from __future__ import annotations

import functools
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from hwprof.collectors.base import AttachedTool, Capability, Collector, CollectorResult, PassContext
from hwprof.collectors.perf_sampling.access import (
    CPI_PART,
    INSTALL_FIX,
    PERMISSION_WORDS,
    last_line,
    perf_binary,
    permission_fix,
    probe_details,
    record_flags,
    sampling_access,
    sampling_events,
    user_only,
)
from hwprof.collectors.perf_sampling.control import (
    AttachOnRequest,
    PerfControl,
    disable,
    enable,
    make_fifos,
    remove_fifos,
    request_attach,
)
from hwprof.collectors.perf_sampling.rate import SamplingPlan, plan_sampling, samplers, smallest_ranked_share

from hwprof.core.kernels import SampleRate
from hwprof.core.spans import timing_forward_s, timing_iteration_s
from hwprof.perf.open_errors import read_paranoid
from hwprof.schema.summaries_tools import CpiPerKernel, PerfSamplingSummary

if TYPE_CHECKING:
    from hwprof.core.config import RunConfig

NAME = "perf_sampling"


@functools.cache
def _probe(binary: str) -> Capability:
    """A real `perf record` of a short child on CLOCK_MONOTONIC, and whether cycles count."""
    suffix = ":u" if user_only() else ""
    with tempfile.TemporaryDirectory(prefix="hwprof-perf-probe-") as tmp:
        out = Path(tmp) / "probe.data"
        command = [binary, "record", *record_flags(binary), "-q", "-e", f"cpu-clock{suffix}", "-k", "CLOCK_MONOTONIC"]
        command += ["-F", "999"]
        command += ["-o", str(out), "--", sys.executable, "-c", "sum(range(10**6))"]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Capability.unavailable(f"perf record could not run: {exc}", INSTALL_FIX)
        text = done.stdout + done.stderr
        if done.returncode != 0 or not out.exists():
            last = last_line(text) or f"exit status {done.returncode}"
            if any(w in text.lower() for w in PERMISSION_WORDS):
                level = read_paranoid()
                return Capability.unavailable(
                    f"perf may not sample here (perf_event_paranoid={level}): {last}", permission_fix()
                )
            if "not found for kernel" in text or "perf not found" in text:
                return Capability.unavailable(f"perf is installed for another kernel: {last}", INSTALL_FIX)
            return Capability.unavailable(f"perf record of a test process failed: {last}", INSTALL_FIX)
    return sampling_access(binary)


class PerfSamplingCollector(Collector):
    name = NAME
    title = "Linux perf sampling: native kernels per layer on every thread"
    pass_name = "kernels"
    needs_layer_markers = True
    switchable = True
    whole_process = True
    attach_reads_run = True  # its sampling plan: the timing pass's forward, the layers pass's shares

    @classmethod
    def probe(cls, config: RunConfig) -> Capability:
        binary = perf_binary(config)
        if binary is None:
            where = config.extra.get("perf_path") or "PATH"
            return Capability.unavailable(f"perf not found ({where})", INSTALL_FIX)
        return _probe(binary)

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self._sampling_plan: SamplingPlan | None = None
        """The pass's plan, made once by _plan (it reads the earlier passes' markers)."""

    def child_env(self, ctx: PassContext) -> dict[str, str]:
        return {"ONEDNN_JIT_PROFILE": "2"}

    def measured_iterations(self, ctx: PassContext) -> int | None:
        return self._plan(ctx).iterations

    def sample_rate(self, ctx: PassContext) -> SampleRate | None:
        """perf's rate on each of torch's threads (the plan counts on config.threads samplers, plan_sampling)."""
        return SampleRate(self._plan(ctx).rate, samplers(self.config))

    def _plan(self, ctx: PassContext) -> SamplingPlan:
        if self._sampling_plan is None:
            self._sampling_plan = _plan(self.config, ctx.run_dir)
        return self._sampling_plan

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


def _plan(config: RunConfig, run_dir: Path) -> SamplingPlan:
    """The sampling plan, the same in the worker (its iterations) and in the parent (perf's rate)."""
    forward_s, iteration_s = timing_forward_s(run_dir), timing_iteration_s(run_dir)
    smallest = smallest_ranked_share(run_dir) if forward_s and not config.perf_rate else None
    return plan_sampling(config, forward_s, iteration_s, smallest)


class PerfRecordTool(AttachedTool):
    """perf record, launched when the worker asks (see control.py), and its conversion at the end."""

    def __init__(self, binary: str, pid: int, ctx: PassContext, capability: Capability) -> None:
        self.binary = binary
        self.pid = pid
        self.ctx = ctx
        self.details = probe_details(capability)
        config = ctx.config
        self.forward_s = timing_forward_s(ctx.run_dir)
        plan = _plan(config, ctx.run_dir)
        self.rate, self.rate_how = plan.rate, plan.how
        self.events = sampling_events(config, self.details)
        self.data = ctx.out_dir / "perf.data"
        self.data.unlink(missing_ok=True)
        self.log = ctx.out_dir / f"{NAME}.log"
        ctx.out_dir.mkdir(parents=True, exist_ok=True)
        ctl, ack = (str(p) for p in make_fifos(ctx.out_dir)[:2])
        self.command = [binary, "record", *record_flags(binary), "-k", "CLOCK_MONOTONIC", "--sample-cpu"]
        self.command += ["-F", str(self.rate), "-p", str(pid)]
        self.callchains = bool(config.extra.get("perf_callchains", True))
        if self.callchains:
            self.command += ["--call-graph", "fp"]
        for event in self.events:
            self.command += ["-e", event]
        self.command += ["-D", "-1", "--control", f"fifo:{ctl},{ack}", "-o", str(self.data)]
        self.process: subprocess.Popen[bytes] | None = None
        self.attach_ms: float | None = None
        """How long the worker's start() waited for perf: from its "ready" to perf's events enabled."""
        self._log_handle = open(self.log, "w")  # noqa: SIM115 - perf writes to it until finish()
        self._control: PerfControl | None = None
        self.server = AttachOnRequest(ctx.out_dir, self._launch)
        if config.attached is not None:
            # A running service (hwprof attach) loaded its libraries long ago, so perf joins it now, its events
            # disabled, and the window's first measured call (a request of the service's) waits for an "enable"
            # only: not for perf to start (about 150 ms, 2026-11-29).
            self._control = self._spawn()

    def _spawn(self) -> PerfControl | None:
        """perf record started on the worker, its events disabled (-D -1); its control FIFO once perf opened it."""
        self.process = subprocess.Popen(self.command, stdout=self._log_handle, stderr=subprocess.STDOUT)
        process = self.process
        return PerfControl.wait_for(self.ctx.out_dir, lambda: process.poll() is None)

    def _launch(self) -> bool:
        """Perf on the worker (started now, or already waiting) with its events enabled; True once it acknowledged."""
        started = time.monotonic()
        control, self._control = self._control or self._spawn(), None
        if control is None:
            return False
        try:
            enabled = control.send("enable")
        finally:
            control.close()
        self.attach_ms = (time.monotonic() - started) * 1e3
        return enabled

    def abandon(self) -> None:
        self.server.cancel()
        self._stop_unused()
        self._log_handle.close()
        remove_fifos(self.ctx.out_dir)

    def _stop_unused(self) -> None:
        """A perf started before the window whose events were never enabled: stopped, as if never started."""
        if self._control is None or self.process is None:
            return
        self._control.close()
        self._control = None
        _wait_or_stop(self.process, 0)
        self.process = None

    def finish(self, worker_returncode: int | None, timeout_s: float = 60.0) -> CollectorResult:
        self.server.cancel()
        self._stop_unused()
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
            why = f"perf record exited with status {returncode} and wrote no samples: {last_line(log_text)}"
            fix = permission_fix() if any(w in log_text.lower() for w in PERMISSION_WORDS) else ""
            return CollectorResult("failed", reason=why, fix=fix, artifacts=artifacts)
        artifacts.append(self.ctx.relpath(self.data))
        try:
            summary, has_jit_map = self._convert(artifacts)
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            return CollectorResult("failed", reason=f"perf output could not be converted: {exc}", artifacts=artifacts)
        self._describe(summary, returncode, has_jit_map)
        status, reason, fix = _outcome(summary, returncode, log_text, worker_returncode)
        return CollectorResult(status, reason=reason, fix=fix, summary=summary, artifacts=artifacts)

    def _convert(self, artifacts: list[str]) -> tuple[PerfSamplingSummary, bool]:
        """perf.data as the pass's tables (data_tables.convert), their files added to `artifacts`, with oneDNN's JIT
        map (/tmp/perf-PID.map) copied into the pass folder where the worker wrote one; (the summary, whether it
        did)."""
        from hwprof.collectors.perf_sampling.data_tables import convert

        jit_map = Path(f"/tmp/perf-{self.pid}.map")
        has_jit_map = jit_map.exists()
        if has_jit_map:
            shutil.copy(jit_map, self.ctx.out_dir / jit_map.name)
            artifacts.append(self.ctx.relpath(self.ctx.out_dir / jit_map.name))
        try:
            converted = convert(self.binary, self.data, self.ctx.out_dir, self.rate, self.pid)
        finally:  # perf script read it where oneDNN wrote it (its pass's worker, ended); the run keeps the copy
            if has_jit_map:
                jit_map.unlink(missing_ok=True)
        artifacts += [self.ctx.relpath(self.ctx.out_dir / name) for name in converted.files]
        return converted.summary, has_jit_map

    def _describe(self, summary: PerfSamplingSummary, returncode: int, has_jit_map: bool) -> None:
        """How perf sampled, in its summary: the command, rate, events, and what it could not see."""
        summary.update(
            command=" ".join(self.command),
            returncode=returncode,
            rate_hz=self.rate,
            rate_chosen=self.rate_how,
            events=self.events,
            version=self.details.version or "",
            jit_perf_map=has_jit_map,
            attach_ms=self.attach_ms,
            perf_data_bytes=self.data.stat().st_size,
        )
        if self.details.user_only:
            summary.kernel_space = "not sampled: user space only (perf_event_paranoid >= 2 without root)"
        cpi = self.details.part(CPI_PART)
        if cpi:
            summary.cpi_per_kernel = CpiPerKernel.of(status="unavailable", reason=cpi.reason, fix=cpi.fix)


def _outcome(
    summary: PerfSamplingSummary, returncode: int, log_text: str, worker_returncode: int | None
) -> tuple[str, str, str]:
    """(status, reason, fix) of a perf record that wrote samples: partial where perf failed, where no sample fell
    inside the measured iterations, or where the worker failed."""
    status, reason, fix = "ok", "", ""
    if returncode not in (0, -signal.SIGINT, 130) and returncode is not None:
        status, reason = "partial", f"perf record exited with status {returncode}: {last_line(log_text)}"
    if not summary.samples_measured:
        status = "partial"
        reason = "no sample fell inside the measured iterations"
        fix = "raise --iters or --perf-rate"
    if worker_returncode not in (0, None) and status == "ok":
        status, reason = "partial", f"the worker exited with status {worker_returncode}"
    return status, reason, fix


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
