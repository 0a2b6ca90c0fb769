"""The torch runtime on a CUDA device (`--device cuda[:N]`), in fp32, fp16 or bf16, NCHW or channels_last.

The model the pipeline reports on (layer table, FLOPs, the fp32 reference of the output check) stays
the fused fp32 module on the CPU; this runtime runs a copy of it on the device, and the layer markers
are attached to that copy (`marker_module`). Stages are timed with CUDA synchronisation: the
pipeline's `h2d` stage copies the letterboxed batch to the device (and casts it), the forward ends
with `torch.cuda.synchronize()`, and so does NMS (which runs on the device's tensors).

TF32: left at torch's defaults (cuDNN convolutions may use TF32, matmuls may not); the values are
recorded in runtime.json so that a reader knows which kernels were allowed on the tensor cores.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from hwprof.workload.runtime import Runtime, _to_float, register

if TYPE_CHECKING:
    import torch

DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def indexed_device(spec: str) -> torch.device:
    """`cuda` as `cuda:0` (the device hwprof checked up front): torch.cuda.set_device refuses a device
    without an index, and a tensor's device always has one, so comparisons need it too."""
    import torch

    device = torch.device(spec)
    return device if device.index is not None else torch.device(device.type, 0)


@register
class CudaTorchRuntime(Runtime):
    name = "torch"
    device_kind = "cuda"
    glue_keeps_threads = True

    def _prepare(self, sample: torch.Tensor) -> None:
        import torch

        self.device = indexed_device(self.config.device)
        torch.cuda.set_device(self.device)
        self.dtype = getattr(torch, DTYPES[self.config.precision])
        module = copy.deepcopy(self.built.module).to(self.device)
        if self.dtype != torch.float32:
            module = module.to(self.dtype)
        if self.config.channels_last:
            module = module.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        self.marker_module = module.eval()
        props = torch.cuda.get_device_properties(self.device)
        self.info.update(
            version=torch.__version__,
            device=self.config.device,
            device_name=props.name,
            sms=props.multi_processor_count,
            cuda=torch.version.cuda,
            cudnn=torch.backends.cudnn.version(),
            executed_precision=self.config.precision,
            channels_last=self.config.channels_last,
            tf32_cudnn=torch.backends.cudnn.allow_tf32,
            tf32_matmul=torch.backends.cuda.matmul.allow_tf32,
            model_bytes=sum(p.numel() * p.element_size() for p in module.parameters()),
        )

    def to_device(self, batch: torch.Tensor) -> torch.Tensor:
        """The host-to-device copy of a letterboxed batch, cast and laid out as the model runs; synchronised."""
        import torch

        x = batch.to(self.device).to(self.dtype)
        if self.config.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        torch.cuda.synchronize(self.device)
        return x

    def synchronize(self) -> None:
        import torch

        torch.cuda.synchronize(self.device)

    def _execute(self, batch: torch.Tensor) -> Any:
        import torch

        if batch.device != self.device:
            batch = self.to_device(batch)
        with torch.inference_mode():
            out = self.marker_module(batch)
        torch.cuda.synchronize(self.device)
        return _to_float(out)

    def layer_outputs(self, batch: torch.Tensor) -> dict[str, torch.Tensor]:
        from hwprof.workload.layer_error import torch_layer_outputs

        outputs = torch_layer_outputs(self.marker_module, self.to_device(batch))
        return {name: t.cpu() for name, t in outputs.items()}
