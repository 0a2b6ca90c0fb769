"""Whether a CUDA device can run here, asked before any pass starts (`--device cuda[:N]`)."""

from __future__ import annotations

import json
import subprocess
import sys

from hwprof.core.host_facts import NVIDIA_CTL, current

__all__ = ["GPU_TORCH_INSTALL", "NVIDIA_CTL", "cuda_unavailable_reason", "require_cuda"]
GPU_TORCH_INSTALL = "pip install torch==2.11.0 torchvision==0.26.0 --index-url https://download.pytorch.org/whl/cu130"
"""The CUDA torch the GPU path was checked with (docs/gpu.md), as the fix for a CPU build."""
_PROBE = (
    "import json, torch; n = torch.cuda.device_count() if torch.cuda.is_available() else 0; "
    "print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda, 'count': n, "
    "'names': [torch.cuda.get_device_name(i) for i in range(n)]}))"
)


def cuda_unavailable_reason(device: str, python: str = sys.executable) -> str | None:
    """None when `device` (cuda or cuda:N) can run, else why not and the fix, in one line."""
    if not current().nvidia_driver():
        return (
            f"--device {device}: no NVIDIA GPU on this host ({NVIDIA_CTL} does not exist); "
            "run on a host with an NVIDIA GPU and its driver, or use --device cpu"
        )
    try:
        out = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=True)
        info = json.loads(out.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError, OSError) as exc:
        return f"--device {device}: torch could not be asked about CUDA ({exc})"
    if info["cuda"] is None:
        return (
            f"--device {device}: torch {info['torch']} is a CPU build; "
            f"fix: {GPU_TORCH_INSTALL}, then pip install -c constraints-gpu.txt '.[gpu]' (docs/gpu.md)"
        )
    index = int(device.partition(":")[2] or 0)
    if index >= info["count"]:
        return f"--device {device}: torch sees {info['count']} CUDA device(s) ({', '.join(info['names']) or 'none'})"
    return None


def require_cuda(device: str) -> None:
    reason = cuda_unavailable_reason(device)
    if reason:
        raise ValueError(reason)
