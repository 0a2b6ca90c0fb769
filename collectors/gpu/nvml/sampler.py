"""The live NVML sampler: gpu_record.py's Nvml class (recordings/h100-2026-11-22), plus the
total-energy counter in every sample so that energy per stage is a counter difference.

A thread (OS name "hwprof-nvml") reads every interval, on CLOCK_MONOTONIC: power (mW), GPU and
memory utilisation (%), SM and memory clocks (MHz), memory used (B), temperature (C) and
nvmlDeviceGetTotalEnergyConsumption (mJ).
"""

from __future__ import annotations

import threading
import time
from typing import Any

COLUMNS = ["t_mono_ns", "power_mw", "util_gpu", "util_mem", "sm_mhz", "mem_mhz", "mem_used", "temp_c", "energy_mj"]


def open_device(index: int) -> tuple[Any, Any]:
    """(pynvml, handle), or an exception with the reason."""
    import pynvml

    pynvml.nvmlInit()
    return pynvml, pynvml.nvmlDeviceGetHandleByIndex(index)


def read_sample(nv: Any, h: Any) -> list[float]:
    u = nv.nvmlDeviceGetUtilizationRates(h)
    m = nv.nvmlDeviceGetMemoryInfo(h)
    return [
        time.monotonic_ns(),
        nv.nvmlDeviceGetPowerUsage(h),
        u.gpu,
        u.memory,
        nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
        nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
        m.used,
        nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
        nv.nvmlDeviceGetTotalEnergyConsumption(h),
    ]


class NvmlSampler:
    def __init__(self, index: int, interval_s: float) -> None:
        self.nv, self.h = open_device(index)
        self.interval_s = interval_s
        self.samples: list[list[float]] = []
        self.error = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hwprof-nvml", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def compute_capability(self) -> tuple[int, int]:
        """The device's (major, minor): how its power readings are averaged depends on it."""
        major, minor = self.nv.nvmlDeviceGetCudaComputeCapability(self.h)
        return int(major), int(minor)

    def read_now(self) -> list[float]:
        return read_sample(self.nv, self.h)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append(read_sample(self.nv, self.h))
            except Exception as exc:  # keep the first reason, go on sampling
                self.error = self.error or repr(exc)
            self._stop.wait(self.interval_s)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
