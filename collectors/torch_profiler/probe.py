"""torch.profiler's probe: one matmul profiled in a child process (torch is not imported in the parent), kept in
hwprof's cache once it recorded its ops (the collector's `probe`)."""

from __future__ import annotations

import functools
import json
import subprocess
import sys

from hwprof.collectors.base import Capability

from hwprof.schema.probes import TorchProfilerProbe

_PROBE_CODE = """
import json, torch
from torch.profiler import profile, ProfilerActivity
x = torch.ones(64, 64)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    with torch.autograd.profiler.record_function("hwprof_probe"):
        (x @ x).sum()
names = {e.name for e in prof.events()}
print(json.dumps({"torch": torch.__version__, "kineto": torch.autograd.kineto_available(),
                  "mkldnn": torch.backends.mkldnn.is_available(),
                  "ok": "hwprof_probe" in names and "aten::mm" in names}))
"""


@functools.cache
def probe_torch_profiler(python: str) -> Capability:
    """Profile one matmul in a child (torch is not imported in the parent): 2.6 s of every collect's plan on a
    2-CPU VM, so a probe that recorded its ops is kept in hwprof's cache under the torch build's key (what
    decides it: torch's version and folder, this Python, the CPU; hwprof.core.torch_build); one that failed
    runs again next time."""
    from hwprof.core.host import cpuinfo_text, hwprof_cache_or_none
    from hwprof.core.torch_build import cached_per_build

    if python != sys.executable:
        return _probe_in_child(python)
    return cached_per_build(
        hwprof_cache_or_none(),
        cpuinfo_text(),
        "torch-profiler-probe",
        lambda: _probe_in_child(python),
        load=lambda data: Capability.ok(details=TorchProfilerProbe.from_json(data, "the cache", "probe.")),
        dump=lambda found: found.details.to_json(),
        keep=lambda found: found.available,
    )


PROFILER_IMPORTS = ("torch._inductor.config",)
"""What torch.profiler's first start imports (it asks `hasattr(torch, "_inductor")`, which imports Inductor and
Dynamo): 1.5-1.9 s of the trace pass's warm-up and of the layers pass's (torch_memory) on the 2-vCPU Xeon, imported
once in the collect's zygote instead (Collector.zygote_imports)."""


def _probe_in_child(python: str) -> Capability:
    try:
        done = subprocess.run([python, "-c", _PROBE_CODE], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Capability.unavailable(f"could not run the torch.profiler probe: {exc}", "check the Python install")
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return Capability.unavailable(f"torch.profiler probe failed: {tail}", "pip install torch==2.13.0")
    info = TorchProfilerProbe.from_json(json.loads(lines[-1]), "the torch.profiler probe's output")
    if not info.ok:
        return Capability.unavailable(
            "torch.profiler recorded no aten op (Kineto unavailable?)", "install a torch build with Kineto"
        )
    return Capability.ok(details=info)
