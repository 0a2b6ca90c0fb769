"""A SYNTHETIC torch.profiler (Kineto) Chrome trace of whole pipeline iterations, for tests only.

Why synthetic: the H100 recordings (shared/recordings/h100-2026-11-22/kineto, tests/fixtures/gpu) profiled
forwards of a tensor already on the device, so they hold no host-to-device or device-to-host copy and no NMS
kernel (every GPU activity in them was launched inside a `forward` range). The live GPU pass profiles whole
iterations (load, preprocess, h2d, forward, postprocess), so its traces do hold them.

The events copy the recordings' format field for field (a `cudaMemsetAsync` -> `Memset (Device)` pair, a
`cudaLaunchKernel` -> kernel pair with `correlation`, `device`, `stream`, `grid`, `block` args; CPU events on the
process's pid/tid, GPU events on pid 0 / tid = stream), plus the `stage <name>` user annotations that the live
collector writes from hwprof's stage markers. Copy events follow Kineto's `gpu_memcpy` naming
("Memcpy HtoD (Pageable -> Device)", args bytes and memory bandwidth). Durations and names are made up: nothing
here is a measurement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

BASE_NS = 1_763_800_000_000_000_000
PID = 451
STREAM = 7


@dataclass
class SynthTrace:
    """Builds the events; `t` is the CPU clock in us since baseTimeNanoseconds, `gpu_t` the GPU's."""

    events: list[dict[str, Any]] = field(default_factory=list)
    t: float = 100.0
    gpu_t: float = 100.0
    correlation: int = 1000
    activities: list[dict[str, Any]] = field(default_factory=list)
    placed: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    """(stage, layer range or "", activity event): where each activity was launched, as the test made it."""
    where: tuple[str, str] = ("", "")

    def annotation(self, name: str, ts: float, dur: float) -> None:
        self.events.append(
            {"ph": "X", "cat": "user_annotation", "name": name, "pid": PID, "tid": PID, "ts": ts, "dur": dur}
        )

    def launch(self, call: str, cat: str, name: str, dur_us: float, **args: Any) -> None:
        """A CPU call at `t` and the GPU activity it starts, queued behind the stream's previous one."""
        self.correlation += 1
        corr = self.correlation
        self.events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": call,
                "pid": PID,
                "tid": PID,
                "ts": self.t,
                "dur": 4.0,
                "args": {"cbid": 211, "correlation": corr},
            }
        )
        start = max(self.gpu_t, self.t + 6.0)
        act = {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": 0,
            "tid": STREAM,
            "ts": start,
            "dur": dur_us,
            "args": {"device": 0, "context": 1, "stream": STREAM, "correlation": corr, **args},
        }
        self.events.append(act)
        self.activities.append(act)
        self.placed.append((*self.where, act))
        self.gpu_t = start + dur_us + 1.0
        self.t += 5.0

    def kernel(self, name: str, dur_us: float) -> None:
        self.launch("cudaLaunchKernel", "kernel", name, dur_us, grid=[64, 1, 1], block=[128, 1, 1])

    def stage(self, name: str, body: Any) -> None:
        begin = self.t
        self.t += 2.0
        self.where = (name, "")
        body()
        self.where = ("", "")
        self.t += 2.0
        self.annotation("forward" if name == "forward" else f"stage {name}", begin, self.t - begin)

    def sync(self) -> None:
        """cudaStreamSynchronize: the CPU waits for the stream (a call with a correlation and no activity)."""
        self.correlation += 1
        wait = max(self.gpu_t - self.t, 1.0)
        self.events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaStreamSynchronize",
                "pid": PID,
                "tid": PID,
                "ts": self.t,
                "dur": wait,
                "args": {"cbid": 131, "correlation": self.correlation},
            }
        )
        self.t += wait + 1.0

    def layer(self, index: int, type_name: str, kernels: list[tuple[str, float]]) -> None:
        begin = self.t
        self.t += 1.0
        self.where = (self.where[0], f"layer {index} {type_name}")
        for name, dur in kernels:
            self.kernel(name, dur)
        self.where = (self.where[0], "")
        self.annotation(f"layer {index} {type_name}", begin, self.t - begin)
        self.t += 1.0

    def iteration(self) -> None:
        self.stage("load", lambda: setattr(self, "t", self.t + 50.0))
        self.stage("preprocess", lambda: setattr(self, "t", self.t + 30.0))
        self.stage(
            "h2d",
            lambda: (
                self.launch(
                    "cudaMemcpyAsync",
                    "gpu_memcpy",
                    "Memcpy HtoD (Pageable -> Device)",
                    40.0,
                    bytes=4915200,
                    **{"memory bandwidth (GB/s)": 122.9},
                ),
                self.kernel("void at::native::elementwise_kernel<128, 2>(int, float)", 3.0),
                self.sync(),
            ),
        )

        def forward() -> None:
            self.layer(0, "Conv", [("implicit_convolve_sgemm", 20.0), ("elementwise_kernel", 2.0)])
            self.launch("cudaMemsetAsync", "gpu_memset", "Memset (Device)", 0.7, bytes=112)
            self.layer(1, "Conv", [("implicit_convolve_sgemm", 25.0)])
            self.layer(2, "C2f", [("cat_kernel", 3.0), ("sigmoid_kernel", 2.0)])
            self.sync()

        self.stage("forward", forward)
        self.stage(
            "postprocess",
            lambda: (
                self.kernel("void at::native::reduce_kernel<512, 1>(max)", 4.0),
                self.kernel("void at::native::index_elementwise_kernel<128, 4>(nonzero)", 2.0),
                self.launch(
                    "cudaMemcpyAsync",
                    "gpu_memcpy",
                    "Memcpy DtoH (Device -> Pageable)",
                    1.5,
                    bytes=8,
                    **{"memory bandwidth (GB/s)": 0.005},
                ),
                self.sync(),
                self.kernel(
                    "void vision::ops::nms_kernel_impl<float>(int, double, float const*, unsigned long long*)", 6.0
                ),
                self.sync(),
            ),
        )

    def chrome_trace(self) -> dict[str, Any]:
        return {
            "schemaVersion": 1,
            "deviceProperties": [{"id": 0, "name": "SYNTHETIC (test-made, not a device)", "numSms": 132}],
            "baseTimeNanoseconds": BASE_NS,
            "traceEvents": sorted(self.events, key=lambda e: e["ts"]),
        }


def synthetic_pipeline_trace(iterations: int = 2) -> tuple[dict[str, Any], SynthTrace]:
    """`iterations` whole pipeline iterations: copies in h2d, a memset in the forward, NMS kernels and a
    device-to-host copy in postprocess."""
    synth = SynthTrace()
    for _ in range(iterations):
        synth.iteration()
        synth.t += 20.0
    return synth.chrome_trace(), synth
