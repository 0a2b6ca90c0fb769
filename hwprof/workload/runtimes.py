"""The runtimes hwprof can run the forward with: loads every runtime module, each of which registers itself with
hwprof.workload.runtime, and picks the one a run asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hwprof.workload.runtime import Runtime, TorchRuntime

if TYPE_CHECKING:
    from hwprof.config import RunConfig
    from hwprof.workload.zoo import BuiltModel


def make_runtime(config: RunConfig, built: BuiltModel, run_dir: Path, out_dir: Path, profile: bool) -> Runtime:
    if config.runtime == "onnxruntime":
        from hwprof.workload.rt_onnxruntime import OnnxRuntime

        return OnnxRuntime(config, built, run_dir, out_dir, profile)
    if config.runtime == "openvino":
        from hwprof.workload.rt_openvino import OpenVinoRuntime

        return OpenVinoRuntime(config, built, run_dir, out_dir, profile)
    if config.device != "cpu":
        from hwprof.workload.rt_cuda import CudaTorchRuntime

        return CudaTorchRuntime(config, built, run_dir, out_dir, profile=False)
    return TorchRuntime(config, built, run_dir, out_dir, profile=False)
