"""Checkpoint loading: the three formats, strict matching, and refusal of anything that runs code."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import os
import pickle
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from hwprof.workload import yolov7 as y7
from hwprof.workload import yolov7_modules as y7m
from hwprof.workload.checkpoint_globals import WeightsError
from hwprof.workload.weights import WeightsInfo, load_checkpoint

TINY = "yolov7-tiny"


def build(name: str, nc: int = 80) -> nn.Module:
    return y7.build_yolov7(name, nc=nc).eval()


@pytest.fixture(scope="module")
def tiny() -> y7.YOLOv7Model:
    torch.manual_seed(0)
    model = y7.build_yolov7(TINY).eval()
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                assert m.running_mean is not None and m.running_var is not None
                m.running_mean.normal_(0, 0.1, generator=gen)
                m.running_var.uniform_(0.5, 1.5, generator=gen)
    return model


@pytest.fixture(scope="module")
def sample() -> torch.Tensor:
    return torch.rand(1, 3, 128, 160, generator=torch.Generator().manual_seed(5))


def outputs(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    with torch.no_grad():
        return model.eval()(x)


OFFICIAL_NAMES = {
    y7.YOLOv7Model: ("models.yolo", "Model"),
    y7m.Detect: ("models.yolo", "Detect"),
    y7m.Conv: ("models.common", "Conv"),
    y7m.Concat: ("models.common", "Concat"),
    y7m.MP: ("models.common", "MP"),
    y7m.SP: ("models.common", "SP"),
    y7m.SPPCSPC: ("models.common", "SPPCSPC"),
    y7m.RepConv: ("models.common", "RepConv"),
}


@contextlib.contextmanager
def official_classes(extra: dict[str, type[nn.Module]] | None = None) -> Iterator[dict[type, type]]:
    """Fake `models.common` / `models.yolo` modules whose classes pickle under the official names.

    Yields our class -> its official stand-in; the fake modules are gone afterwards, so loading
    cannot import them.
    """
    fakes = {name: types.ModuleType(name) for name in ("models", "models.common", "models.yolo")}
    mapping: dict[type, type] = {}
    for ours, (module, name) in OFFICIAL_NAMES.items():
        stand_in = type(name, (ours,), {"__module__": module, "__qualname__": name})
        setattr(fakes[module], name, stand_in)
        mapping[ours] = stand_in
    for qualified, cls in (extra or {}).items():
        module, name = qualified.rsplit(".", 1)
        cls.__module__, cls.__qualname__, cls.__name__ = module, name, name
        setattr(fakes[module], name, cls)
    assert not set(fakes) & set(sys.modules)
    sys.modules.update(fakes)
    try:
        yield mapping
    finally:
        for name in fakes:
            del sys.modules[name]


def save_official(model: nn.Module, path: Path, extra: dict[str, type[nn.Module]] | None = None) -> None:
    """Save like the official code: {'model': model.half(), ...} with the official class names."""
    model = copy.deepcopy(model).half()
    with official_classes(extra) as mapping:
        for m in model.modules():
            if type(m) in mapping:
                m.__class__ = mapping[type(m)]
        torch.save({"model": model, "optimizer": None, "training_results": None, "epoch": -1}, path)


def test_plain_state_dict_round_trip(tmp_path: Path, tiny: y7.YOLOv7Model, sample: torch.Tensor) -> None:
    path = tmp_path / "tiny_sd.pt"
    torch.save(tiny.state_dict(), path)
    model, info = load_checkpoint(path, TINY, build)
    assert isinstance(model, y7.YOLOv7Model)
    assert info == WeightsInfo(
        path=path,
        format="state_dict",
        dtype="float32",
        sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
        num_tensors=len(tiny.state_dict()),
    )
    assert info.to_dict()["path"] == str(path)
    pred, raw = outputs(model, sample)
    ref_pred, ref_raw = outputs(tiny, sample)
    assert torch.equal(pred, ref_pred) and all(torch.equal(a, b) for a, b in zip(raw, ref_raw, strict=True))


def test_state_dict_nested_under_key(tmp_path: Path, tiny: y7.YOLOv7Model) -> None:
    """Training scripts store numpy scalars and arrays next to the weights: data, so allowed."""
    import numpy as np

    path = tmp_path / "nested.pt"
    extra = {"best_fitness": np.float64(0.5), "results": np.arange(3, dtype=np.float32)}
    torch.save({"state_dict": tiny.state_dict(), "epoch": 3, **extra}, path)
    _, info = load_checkpoint(path, TINY, build)
    assert info.format == "state_dict"


def test_fused_state_dict_loads_into_fused_model(tmp_path: Path, tiny: y7.YOLOv7Model, sample: torch.Tensor) -> None:
    fused = copy.deepcopy(tiny).fuse()
    path = tmp_path / "fused.pt"
    torch.save(fused.state_dict(), path)
    model, info = load_checkpoint(path, TINY, build)
    assert info.fused and model.is_fused
    assert torch.allclose(outputs(model, sample)[0], outputs(fused, sample)[0])


def test_official_checkpoint(tmp_path: Path, tiny: y7.YOLOv7Model, sample: torch.Tensor) -> None:
    path = tmp_path / "yolov7-tiny.pt"
    save_official(tiny, path)
    assert "models" not in sys.modules
    model, info = load_checkpoint(path, TINY, build)
    assert (info.format, info.dtype, info.nc, info.fused) == ("yolov7-official", "float16", 80, False)
    assert info.num_tensors == len(tiny.state_dict())
    assert all(p.dtype == torch.float32 for p in model.parameters())
    reference = copy.deepcopy(tiny).half().float()
    pred, raw = outputs(model, sample)
    ref_pred, ref_raw = outputs(reference, sample)
    assert max((a - b).abs().max().item() for a, b in zip(raw, ref_raw, strict=True)) < 1e-4
    assert torch.allclose(pred, ref_pred, atol=1e-3)


def test_official_checkpoint_for_other_architecture(tmp_path: Path, tiny: y7.YOLOv7Model) -> None:
    path = tmp_path / "yolov7-tiny.pt"
    save_official(tiny, path)
    with pytest.raises(WeightsError, match=r"holds yolov7-tiny weights, not yolov7; use model 'yolov7-tiny'"):
        load_checkpoint(path, "yolov7", build)


class _Implicit(nn.Module):
    def __init__(self, shape: tuple[int, ...], mean: float) -> None:
        super().__init__()
        self.implicit = nn.Parameter(torch.randn(shape) * 0.05 + mean)


def test_official_release_checkpoint_with_idetect(tmp_path: Path, tiny: y7.YOLOv7Model, sample: torch.Tensor) -> None:
    """Release files carry IDetect: conv(x + ia) * im per level; the loader folds it into Detect."""

    class ImplicitA(_Implicit):
        pass

    class ImplicitM(_Implicit):
        pass

    class IDetect(y7m.Detect):
        pass

    torch.manual_seed(1)
    head: Any = tiny.model[-1]
    release = copy.deepcopy(tiny)
    release_head: Any = release.model[-1]
    release_head.ia = nn.ModuleList(ImplicitA((1, conv.in_channels, 1, 1), 0.0) for conv in head.m)
    release_head.im = nn.ModuleList(ImplicitM((1, conv.out_channels, 1, 1), 1.0) for conv in head.m)
    release.yaml["head"][-1][2] = "IDetect"
    path = tmp_path / "yolov7-tiny-release.pt"
    release_head.__class__ = IDetect
    save_official(
        release,
        path,
        extra={
            "models.common.ImplicitA": ImplicitA,
            "models.common.ImplicitM": ImplicitM,
            "models.yolo.IDetect": IDetect,
        },
    )
    model, info = load_checkpoint(path, TINY, build)
    assert info.format == "yolov7-official" and any("IDetect" in n for n in info.notes)

    features: list[torch.Tensor] = []
    layers: Any = model.model
    handle = layers[-1].register_forward_hook(lambda _m, inputs, _o: features.extend(inputs[0]))
    try:
        _, raw = outputs(model, sample)
    finally:
        handle.remove()
    half: Any = copy.deepcopy(release_head).half().float()
    for level, (feature, got) in enumerate(zip(features, raw, strict=True)):
        expected = half.m[level](feature + half.ia[level].implicit) * half.im[level].implicit
        bs, _, ny, nx = expected.shape
        expected = expected.view(bs, 3, 85, ny, nx).permute(0, 1, 3, 4, 2)
        assert torch.allclose(got, expected, atol=1e-4), level


class _Payload:
    """Unpickling this runs os.system: what a malicious checkpoint does."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("zip_format", [True, False], ids=["zip", "legacy"])
def test_code_in_checkpoint_is_refused_and_never_run(tmp_path: Path, zip_format: bool) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"model": _Payload(marker)}, path, _use_new_zipfile_serialization=zip_format)
    with pytest.raises(WeightsError, match=r"refusing to unpickle (posix|nt)\.system: not a known YOLO class") as e:
        load_checkpoint(path, TINY, build)
    assert "\n" not in str(e.value) and str(path) in str(e.value)
    assert not marker.exists()


class Backdoor(nn.Module):
    """An unknown nn.Module subclass: its __setstate__ would run on unpickling."""

    def __setstate__(self, state: dict[str, object]) -> None:
        Path(str(state["marker"])).touch()
        super().__setstate__(state)


def test_unknown_class_is_refused(tmp_path: Path, tiny: y7.YOLOv7Model) -> None:
    marker = tmp_path / "ran"
    evil = Backdoor()
    evil.marker = str(marker)  # type: ignore[assignment]
    path = tmp_path / "unknown.pt"
    torch.save({"state_dict": tiny.state_dict(), "extra": evil}, path)
    with pytest.raises(WeightsError, match=r"refusing to unpickle .*Backdoor"):
        load_checkpoint(path, TINY, build)
    assert not marker.exists()
    # Our own class names are not on the list either: only official and ultralytics ones are.
    path2 = tmp_path / "ours_pickled.pt"
    torch.save({"model": tiny}, path2)
    with pytest.raises(WeightsError, match=r"refusing to unpickle hwprof\.workload\."):
        load_checkpoint(path2, TINY, build)


def test_missing_directory_empty_and_corrupt_files(tmp_path: Path, tiny: y7.YOLOv7Model) -> None:
    with pytest.raises(WeightsError, match="does not exist, not a checkpoint file") as e:
        load_checkpoint(tmp_path / "nope.pt", TINY, build)
    assert str(pickle.loads(pickle.dumps(e.value))) == str(e.value)  # crosses process boundaries
    with pytest.raises(WeightsError, match="is a directory"):
        load_checkpoint(tmp_path, TINY, build)
    empty = tmp_path / "empty.pt"
    empty.write_bytes(b"")
    with pytest.raises(WeightsError, match="empty file"):
        load_checkpoint(empty, TINY, build)
    good = tmp_path / "good.pt"
    torch.save(tiny.state_dict(), good)
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(WeightsError, match="corrupt, truncated") as e:
        load_checkpoint(truncated, TINY, build)
    assert "\n" not in str(e.value)
    text = tmp_path / "notes.pt"
    text.write_text("these are not weights\n")
    with pytest.raises(WeightsError, match="corrupt, truncated"):
        load_checkpoint(text, TINY, build)


def test_a_device_is_named_as_one_and_never_read(tmp_path: Path) -> None:
    """/dev/zero used to be "no such file" (and, past that check, would be read for ever)."""
    with pytest.raises(WeightsError, match=r"^/dev/zero: is a character device, not a checkpoint file; pass the"):
        load_checkpoint("/dev/zero", TINY, build)
    os.mkfifo(tmp_path / "pipe.pt")
    with pytest.raises(WeightsError, match=r"pipe\.pt: is a named pipe, not a checkpoint file"):
        load_checkpoint(tmp_path / "pipe.pt", TINY, build)
    long = tmp_path / ("w" * 300 + ".pt")
    with pytest.raises(WeightsError, match=r"\(\d+ characters\): is too long for a path") as e:
        load_checkpoint(long, TINY, build)
    assert len(str(e.value)) < 250


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({}, "empty checkpoint"),
        ({"epoch": 3, "lr": 0.1}, "not a YOLO checkpoint"),
        ([1, 2, 3], "holds a list"),
        ({"model": nn.Sequential(nn.Conv2d(3, 4, 1))}, "not a YOLO detection model"),
    ],
)
def test_not_a_checkpoint(tmp_path: Path, payload: object, message: str) -> None:
    path = tmp_path / "x.pt"
    torch.save(payload, path)
    with pytest.raises(WeightsError, match=message):
        load_checkpoint(path, TINY, build)


def test_wrong_model_lists_differing_keys(tmp_path: Path, tiny: y7.YOLOv7Model) -> None:
    path = tmp_path / "tiny.pt"
    torch.save(tiny.state_dict(), path)
    with pytest.raises(WeightsError, match=r"do not fit model 'yolov7'.*model\.\d+\.") as e:
        load_checkpoint(path, "yolov7", build)
    assert "\n" not in str(e.value)
    state = tiny.state_dict()
    state.pop("model.0.conv.weight")
    torch.save(state, path)
    with pytest.raises(WeightsError, match=r"1 tensors missing from the file \(model\.0\.conv\.weight\)"):
        load_checkpoint(path, TINY, build)


def test_class_count_from_official_checkpoint(tmp_path: Path, sample: torch.Tensor) -> None:
    torch.manual_seed(0)
    small = y7.build_yolov7(TINY, nc=3).eval()
    small.names = {0: "cat", 1: "dog", 2: "bird"}
    path = tmp_path / "nc3.pt"
    save_official(small, path)
    model, info = load_checkpoint(path, TINY, build)
    assert info.nc == 3 and model.names == {0: "cat", 1: "dog", 2: "bird"}
    assert outputs(model, sample)[0].shape[-1] == 8
    with pytest.raises(WeightsError, match="3 classes and the model builder cannot take nc"):
        load_checkpoint(path, TINY, lambda name: y7.build_yolov7(name))


@pytest.fixture(scope="module")
def ultralytics_model() -> nn.Module:
    from ultralytics.nn.tasks import DetectionModel

    torch.manual_seed(0)
    with contextlib.redirect_stdout(io.StringIO()):
        return DetectionModel("yolov8n.yaml", verbose=False).eval()


def build_ultralytics(name: str, nc: int = 80) -> nn.Module:
    from ultralytics.nn.tasks import DetectionModel

    with contextlib.redirect_stdout(io.StringIO()):
        return DetectionModel(name, nc=nc, verbose=False).eval()


def test_ultralytics_checkpoint(tmp_path: Path, ultralytics_model: nn.Module) -> None:
    path = tmp_path / "yolov8n.pt"
    torch.save({"model": copy.deepcopy(ultralytics_model).half(), "ema": None, "epoch": -1}, path)
    model, info = load_checkpoint(path, "yolov8n.yaml", build_ultralytics)
    assert (info.format, info.dtype, info.nc) == ("ultralytics", "float16", 80)
    assert type(model).__name__ == "DetectionModel"
    x = torch.rand(1, 3, 128, 128, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        got = model.eval()(x)[0]
        expected = copy.deepcopy(ultralytics_model).half().float().eval()(x)[0]
    assert torch.allclose(got, expected, atol=1e-3)
    assert "torchvision" not in sys.modules


def test_ultralytics_checkpoint_into_wrong_model(tmp_path: Path, ultralytics_model: nn.Module) -> None:
    path = tmp_path / "yolov8n.pt"
    torch.save({"model": ultralytics_model}, path)
    with pytest.raises(WeightsError, match="do not fit model 'yolov7-tiny'"):
        load_checkpoint(path, TINY, build)
