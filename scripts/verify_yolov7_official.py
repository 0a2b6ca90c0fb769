#!/usr/bin/env python
"""Compare this project's YOLOv7 models with the official code, side by side. Run by hand:

    python scripts/verify_yolov7_official.py --official-repo /path/to/WongKinYiu/yolov7

For each of yolov7, yolov7-tiny, yolov7x it builds the official model from the checkout's own
models/yolo.py and cfg/deploy/<name>.yaml, and ours from the same cfg dict, then checks:
  - our packaged cfg holds the same data as the official deploy cfg
  - top-level layer list: same length, class names and from-edges
  - state-dict keys (in order) and shapes identical, unfused and fused
  - parameter counts, unfused and fused (RepConv + Conv/BN), against the published figures
  - FLOPs at 640x640 by torch.utils.flop_counter.FlopCounterMode, fused and unfused
  - an official-format checkpoint ({'model': model.half(), 'optimizer': None, ...}, pickled with
    the official classes) loads through hwprof.workload.weights and gives the official raw head
    output (fp16 weights, fp32 compute) within 1e-3, unfused and fused
  - the same for a release-style checkpoint built from cfg/training/<name>.yaml (IDetect head)
Exit status 0 when every check passes.

The official code imports torchvision (and pandas, seaborn, scipy, tqdm for training utilities)
at module level. torchvision cannot be imported in this environment, so this script puts inert
stand-ins for those modules into sys.modules before importing the official code; nothing the
checks use comes from them. This is the official code's need: the project itself imports neither.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib
import importlib.machinery
import io
import sys
import tempfile
import types
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import yaml
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from hwprof.workload import yolov7 as y7  # noqa: E402
from hwprof.workload.weights import load_checkpoint  # noqa: E402

EXPECTED = {
    # name: (fused params, fused GFLOPs at 640), figures of the official model
    "yolov7": (36_905_341, 104.5),
    "yolov7-tiny": (6_219_709, 13.70),
    "yolov7x": (71_311_741, 189.7),
}
EXPECTED_UNFUSED_YOLOV7 = 37_620_125
FLOPS_REL_TOL = 0.005
OUTPUT_TOL = 1e-3


class _Inert:
    """Any attribute, call or assignment succeeds and does nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> _Inert:
        return _Inert()

    def __getattr__(self, name: str) -> _Inert:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert()


class _InertModule(types.ModuleType):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__spec__ = importlib.machinery.ModuleSpec(name, None)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert()


def _stub(name: str) -> None:
    parts = name.split(".")
    for depth in range(1, len(parts) + 1):
        qualified = ".".join(parts[:depth])
        if qualified not in sys.modules:
            sys.modules[qualified] = _InertModule(qualified)


def import_official(repo: Path) -> tuple[types.ModuleType, types.ModuleType]:
    """models.yolo and models.common of the checkout, with stand-ins for what cannot be imported."""
    importlib.import_module("torch._dynamo")  # scans installed packages once; before any stand-in exists
    for name in ("torchvision", "torchvision.ops", "torchvision.utils", "torchvision.transforms"):
        _stub(name)
    for name in ("pandas", "seaborn", "scipy.cluster.vq", "scipy.signal", "tqdm", "thop"):
        try:
            importlib.import_module(name)
        except ImportError:
            _stub(name)
    sys.path.insert(0, str(repo))
    with contextlib.redirect_stdout(io.StringIO()):
        yolo = importlib.import_module("models.yolo")
        common = importlib.import_module("models.common")
    setattr(yolo, "model_info", lambda *args, **kwargs: None)  # noqa: B010  skips a thop FLOPs pass and a log line per build
    return yolo, common


@dataclass
class Report:
    rows: list[tuple[str, str, bool]] = field(default_factory=list)

    def check(self, label: str, ok: bool, detail: str) -> bool:
        self.rows.append((label, detail, ok))
        print(f"  [{'PASS' if ok else 'FAIL'}] {label}: {detail}", flush=True)
        return ok

    @property
    def passed(self) -> bool:
        return all(ok for _, _, ok in self.rows)


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def gflops(model: nn.Module, size: int = 640) -> float:
    counter = FlopCounterMode(display=False)
    with counter, torch.inference_mode():
        model(torch.zeros(1, 3, size, size))
    return counter.get_total_flops() / 1e9


def layer_rows(model: Any) -> list[tuple[int, str, Any]]:
    return [(m.i, type(m).__name__, m.f) for m in model.model]


def state_shapes(model: nn.Module) -> list[tuple[str, tuple[int, ...]]]:
    return [(k, tuple(v.shape)) for k, v in model.state_dict().items()]


def first_difference(a: list[Any], b: list[Any]) -> str:
    if len(a) != len(b):
        return f"lengths {len(a)} vs {len(b)}"
    for x, y in zip(a, b, strict=True):
        if x != y:
            return f"official {x} vs ours {y}"
    return "identical"


def randomize_batch_norms(model: nn.Module, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                assert m.running_mean is not None and m.running_var is not None
                m.running_mean.normal_(0.0, 0.1, generator=gen)
                m.running_var.uniform_(0.5, 1.5, generator=gen)
                m.weight.uniform_(0.5, 1.5, generator=gen)
                m.bias.normal_(0.0, 0.1, generator=gen)


def raw_outputs(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    with torch.no_grad():
        pred, raw = model.eval()(x)
    return pred, list(raw)


def max_diff(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    return max((x.float() - y.float()).abs().max().item() for x, y in zip(a, b, strict=True))


def quiet(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Runs official code without its prints (and without autograd, which its IDetect.fuse needs)."""
    with contextlib.redirect_stdout(io.StringIO()), torch.no_grad():
        return fn(*args, **kwargs)


def save_official_checkpoint(model: nn.Module, path: Path) -> None:
    """As the official reparameterization notebook saves deploy weights."""
    ckpt = {"model": copy.deepcopy(model).half(), "optimizer": None, "training_results": None, "epoch": -1}
    torch.save(ckpt, path)


def compare_checkpoint(report: Report, label: str, official: nn.Module, name: str, path: Path, x: torch.Tensor) -> None:
    save_official_checkpoint(official, path)
    ours, info = load_checkpoint(path, name, y7.build_yolov7)
    reference: Any = copy.deepcopy(official).half().float().eval()
    ref_pred, ref_raw = raw_outputs(reference, x)
    pred, raw = raw_outputs(ours, x)
    diff = max_diff(ref_raw, raw)
    notes = f"; {'; '.join(info.notes)}" if info.notes else ""
    report.check(
        f"{label} checkpoint -> weights.py, raw head max |diff|",
        diff <= OUTPUT_TOL,
        f"{diff:.3g} (raw max |value| {max(r.abs().max().item() for r in ref_raw):.3g}; "
        f"pred max |diff| {max_diff([ref_pred], [pred]):.3g} px; file {info.format}, "
        f"{info.dtype}, {info.num_tensors} tensors{notes})",
    )
    quiet(reference.fuse)
    ours.fuse()  # type: ignore[operator]
    diff = max_diff(raw_outputs(reference, x)[1], raw_outputs(ours, x)[1])
    report.check(f"{label} checkpoint, both fused, raw head max |diff|", diff <= OUTPUT_TOL, f"{diff:.3g}")


def verify(name: str, repo: Path, yolo: types.ModuleType, report: Report, tmp: Path, imgsz: int) -> None:
    print(f"\n== {name}", flush=True)
    cfg_file = repo / "cfg" / "deploy" / f"{name}.yaml"
    official_cfg = yaml.safe_load(cfg_file.read_text())
    ours_packaged = y7.load_cfg(name)
    report.check("packaged cfg equals official deploy cfg", ours_packaged == official_cfg, str(cfg_file))

    torch.manual_seed(0)
    official = quiet(yolo.Model, copy.deepcopy(official_cfg), ch=3, nc=80).eval()
    torch.manual_seed(0)
    ours = y7.build_yolov7(name, cfg=copy.deepcopy(official_cfg)).eval()

    a: list[Any] = layer_rows(official)
    b: list[Any] = layer_rows(ours)
    report.check("top-level layers (index, class, from)", a == b, f"{len(b)} layers, {first_difference(a, b)}")
    short_types = [str(m.type).rsplit(".", 1)[-1] for m in ours.model]
    official_types = [str(m.type).rsplit(".", 1)[-1] for m in official.model]
    report.check(".type short names", short_types == official_types, first_difference(official_types, short_types))
    a, b = state_shapes(official), state_shapes(ours)
    report.check("state-dict keys and shapes", a == b, f"{len(b)} tensors, {first_difference(a, b)}")
    p_official, p_ours = n_params(official), n_params(ours)
    detail = f"official {p_official:,}, ours {p_ours:,}"
    ok = p_official == p_ours and (name != "yolov7" or p_ours == EXPECTED_UNFUSED_YOLOV7)
    report.check("parameters, unfused", ok, detail)
    g_official, g_ours = gflops(official, imgsz), gflops(ours, imgsz)
    report.check(
        f"GFLOPs at {imgsz}, unfused",
        abs(g_official - g_ours) < 1e-6,
        f"official {g_official:.2f}, ours {g_ours:.2f}",
    )

    randomize_batch_norms(official, seed=1)
    x = torch.rand(1, 3, imgsz, imgsz, generator=torch.Generator().manual_seed(2))
    compare_checkpoint(report, "deploy", official, name, tmp / f"{name}.pt", x)

    fused_official = quiet(copy.deepcopy(official).fuse)
    fused_ours = copy.deepcopy(ours).fuse()
    a, b = state_shapes(fused_official), state_shapes(fused_ours)
    report.check("fused state-dict keys and shapes", a == b, f"{len(b)} tensors, {first_difference(a, b)}")
    expected_params, expected_gflops = EXPECTED[name]
    p_official, p_ours = n_params(fused_official), n_params(fused_ours)
    report.check(
        "parameters, fused",
        p_official == p_ours == expected_params,
        f"official {p_official:,}, ours {p_ours:,}, expected {expected_params:,}",
    )
    g_official, g_ours = gflops(fused_official, imgsz), gflops(fused_ours, imgsz)
    ok = abs(g_official - g_ours) < 1e-6 and (
        imgsz != 640 or abs(g_ours - expected_gflops) <= FLOPS_REL_TOL * expected_gflops
    )
    report.check(
        f"GFLOPs at {imgsz}, fused",
        ok,
        f"official {g_official:.2f}, ours {g_ours:.2f}, expected {expected_gflops} ±{FLOPS_REL_TOL:.1%}",
    )

    training_cfg = repo / "cfg" / "training" / f"{name}.yaml"
    if training_cfg.is_file():
        torch.manual_seed(3)
        release = quiet(yolo.Model, str(training_cfg), ch=3, nc=80).eval()
        randomize_batch_norms(release, seed=4)
        kind = type(release.model[-1]).__name__
        compare_checkpoint(report, f"release-style ({kind})", release, name, tmp / f"{name}-training.pt", x)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--official-repo", type=Path, required=True, help="checkout of WongKinYiu/yolov7")
    parser.add_argument("--models", nargs="+", default=list(y7.MODEL_NAMES), choices=y7.MODEL_NAMES)
    parser.add_argument("--imgsz", type=int, default=640, help="input size for FLOPs and outputs")
    args = parser.parse_args(argv)
    repo = args.official_repo.resolve()
    if not (repo / "models" / "yolo.py").is_file():
        parser.error(f"{repo} is not a checkout of WongKinYiu/yolov7 (no models/yolo.py)")
    warnings.filterwarnings("ignore", message="torch.meshgrid: in an upcoming release")  # official code
    yolo, _ = import_official(repo)
    print(f"official code: {repo}; torch {torch.__version__}; threads {torch.get_num_threads()}")
    report = Report()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            verify(name, repo, yolo, report, Path(tmp), args.imgsz)
    failed = [label for label, _, ok in report.rows if not ok]
    print(
        f"\n{len(report.rows) - len(failed)}/{len(report.rows)} checks passed"
        + (f"; FAILED: {failed}" if failed else "")
    )
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
