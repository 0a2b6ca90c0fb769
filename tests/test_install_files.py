"""The two installs: constraints.txt (the CPU torch: README command 1, tox, CI) and constraints-gpu.txt (an
NVIDIA GPU host, after a CUDA torch from PyTorch's index). Checked with pip's own resolver, offline, against
a stand-in wheel named as the CUDA build the GPU path was checked on (torch 2.11.0+cu130): the GPU file keeps
it, the CPU file refuses it, so constraints.txt is never forced on a CUDA install unnoticed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from hwprof.hardware.gpu_device import GPU_TORCH_INSTALL

ROOT = Path(__file__).resolve().parents[1]
CUDA_TORCH = "2.11.0+cu130"


def _wheel(folder: Path, name: str, version: str) -> Path:
    """A minimal, valid wheel: enough for pip to resolve it (nothing is installed)."""
    dist = f"{name}-{version}"
    path = folder / f"{dist}-py3-none-any.whl"
    meta = {
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: hwprof-test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    with zipfile.ZipFile(path, "w") as z:
        for arc, text in meta.items():
            z.writestr(arc, text)
        z.writestr(f"{dist}.dist-info/RECORD", "".join(f"{a},,\n" for a in [*meta, f"{dist}.dist-info/RECORD"]))
    return path


def _resolve(constraints: Path, links: Path) -> subprocess.CompletedProcess[str]:
    """pip's resolver on `torch` under `constraints`, with only `links` to pick from (no index, no config)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-deps", "--no-index"]
    cmd += ["--find-links", str(links), "-c", str(constraints), "torch"]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture(scope="module")
def cuda_links(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("links")
    _wheel(folder, "torch", CUDA_TORCH)
    return folder


def test_gpu_constraints_keep_the_cuda_torch(cuda_links: Path) -> None:
    done = _resolve(ROOT / "constraints-gpu.txt", cuda_links)
    assert done.returncode == 0, done.stderr
    assert f"Would install torch-{CUDA_TORCH}" in done.stdout


def test_cpu_constraints_refuse_a_cuda_torch(cuda_links: Path) -> None:
    done = _resolve(ROOT / "constraints.txt", cuda_links)
    assert done.returncode != 0 and "ResolutionImpossible" in done.stderr


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            name = re.split(r"[=<>!~ ]", line, maxsplit=1)[0].lower()
            pins[name] = line
    return pins


def test_both_installs_share_every_pin_but_torch() -> None:
    common, cpu, gpu = (_pins(ROOT / f) for f in ("constraints-common.txt", "constraints.txt", "constraints-gpu.txt"))
    assert set(cpu) == set(gpu) == {"torch", "torchvision"}
    assert not set(common) & {"torch", "torchvision"}
    for name in ("constraints.txt", "constraints-gpu.txt"):
        assert "-c constraints-common.txt" in (ROOT / name).read_text().splitlines()
    assert gpu["torch"] == "torch==" + CUDA_TORCH.split("+")[0]


def test_docs_gpu_install_is_the_one_the_cuda_error_names() -> None:
    """The GPU page's install command installs the CUDA torch with the command hwprof prints when torch is a CPU
    build, then hwprof with constraints-gpu.txt, and names the versions the GPU path was checked on."""
    readme = (ROOT / "docs" / "gpu.md").read_text()
    assert GPU_TORCH_INSTALL in readme
    gpu_command = next(line for line in readme.splitlines() if "constraints-gpu.txt" in line and "pip install" in line)
    assert "-c constraints.txt" not in gpu_command and "--device cuda" in gpu_command
    for fact in ("2.11.0+cu130", "CUDA 13.0", "cuDNN 9.19", "580.159.04"):
        assert fact in readme


def test_every_package_of_the_tree_is_in_the_distribution() -> None:
    """pyproject lists its packages by name: a new package left out installs nowhere but the checkout."""
    import tomllib

    root = Path(__file__).parent.parent
    listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = (("hwprof", "hwprof"), ("collectors", "hwprof.collectors"))
    on_disk = {
        ".".join((name, *init.parent.relative_to(root / folder).parts))
        for folder, name in folders
        for init in (root / folder).rglob("__init__.py")
    }
    assert on_disk - listed == set()
