"""The model exported once per run into `<run>/model/`, for the runtimes that read ONNX.

`torch.onnx.export(..., dynamo=False)` under `torch.no_grad()` (ultralytics' head refuses
inference tensors) keeps module scopes in node names, which is what maps runtime nodes back to
layers. The first pass that needs the file exports it; later passes reuse it when the recorded
input shape matches and the hash still holds. ONNX Runtime's int8 is dynamic quantization of
that file (weights QUInt8: on this CPU ORT's ConvInteger with QInt8 weights ran 3.5x slower). Its int8-static
is static quantization in the QDQ format, calibrated on the run's own letterboxed batches: uint8 activations and
int8 weights (u8s8, the pair MLAS's VNNI and AMX-INT8 kernels take), ORT fusing each QDQ group into an integer
kernel when it loads the file; the detection head (the last layer: its 1x1 convolutions and its decode, box
arithmetic, sigmoid, concat of pixel coordinates with scores) stays fp32, since one uint8 scale over coordinates up
to imgsz and scores below 1 erases the scores.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwprof.core.atomic import atomic_write_text

if TYPE_CHECKING:
    import numpy as np
    import torch

MODEL_DIR = "model"
EXPORT_JSON = "export.json"
OPSET = 17
INPUT_NAME = "images"


@dataclass
class ExportedModel:
    path: str
    """Relative to the run directory."""
    sha256: str
    bytes: int
    seconds: float
    input_shape: list[int]
    opset: int = OPSET
    variant: str = "fp32"
    source: str = ""
    """For a derived file (int8): the file it was made from."""
    calibration: str = ""
    """int8-static: what it was calibrated on (the images, by name, and the batches' shape)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _load_recorded(run_dir: Path) -> dict[str, ExportedModel]:
    """model/export.json: variant ("fp32", "int8") -> the file an earlier pass of the run recorded; none
    where the file cannot be read."""
    path = run_dir / MODEL_DIR / EXPORT_JSON
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return recorded_from_json(doc)


def recorded_from_json(doc: Any) -> dict[str, ExportedModel]:
    """export.json's entries that are ExportedModel's fields (another entry is not reused, and not kept)."""
    out: dict[str, ExportedModel] = {}
    for variant, entry in (doc if isinstance(doc, dict) else {}).items():
        try:
            out[str(variant)] = ExportedModel(**entry)
        except TypeError:
            continue
    return out


def _reusable(run_dir: Path, entry: ExportedModel | None, shape: list[int], name: str) -> ExportedModel | None:
    """The recorded file if it is this model's, for this input shape, and unchanged since."""
    if entry is None or entry.input_shape != shape or not Path(entry.path).name.startswith(name + "."):
        return None
    path = run_dir / entry.path
    if not path.is_file() or sha256_of(path) != entry.sha256:
        return None
    return entry


def _record(run_dir: Path, model: ExportedModel) -> None:
    recorded = _load_recorded(run_dir)
    recorded[model.variant] = model
    doc = {variant: entry.to_dict() for variant, entry in recorded.items()}
    atomic_write_text(run_dir / MODEL_DIR / EXPORT_JSON, json.dumps(doc, indent=1))


def export_onnx(module: torch.nn.Module, sample: torch.Tensor, run_dir: Path, name: str) -> ExportedModel:
    """The run's fp32 ONNX file, exported now or reused from an earlier pass of the same run."""
    import torch

    shape = list(sample.shape)
    found = _reusable(run_dir, _load_recorded(run_dir).get("fp32"), shape, name)
    if found is not None:
        return found
    out = run_dir / MODEL_DIR / f"{name}.onnx"
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    import warnings

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            (sample,),
            str(out),
            opset_version=OPSET,
            dynamo=False,
            input_names=[INPUT_NAME],
            do_constant_folding=True,
        )
    model = ExportedModel(
        path=str(out.relative_to(run_dir)),
        sha256=sha256_of(out),
        bytes=out.stat().st_size,
        seconds=time.perf_counter() - t0,
        input_shape=shape,
    )
    _record(run_dir, model)
    return model


def quantize_int8(fp32: ExportedModel, run_dir: Path) -> ExportedModel:
    """Dynamic int8 quantization of the fp32 file (ONNX Runtime's own tool), made once per run."""
    found = _reusable(run_dir, _load_recorded(run_dir).get("int8"), fp32.input_shape, Path(fp32.path).stem)
    if found is not None and found.source == fp32.sha256:
        return found
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    source = run_dir / fp32.path
    out = source.with_name(source.stem + ".int8.onnx")
    t0 = time.perf_counter()
    previous = logging.getLogger().level
    logging.getLogger().setLevel(logging.ERROR)  # its advice to pre-process is printed on every call
    try:
        quantize_dynamic(str(source), str(out), weight_type=QuantType.QUInt8)
    finally:
        logging.getLogger().setLevel(previous)
    return _record_derived(run_dir, out, fp32, "int8", t0)


def _record_derived(
    run_dir: Path, out: Path, fp32: ExportedModel, variant: str, t0: float, calibration: str = ""
) -> ExportedModel:
    """The file made from the fp32 one (quantized), recorded in export.json for the run's later passes."""
    model = ExportedModel(
        path=str(out.relative_to(run_dir)),
        sha256=sha256_of(out),
        bytes=out.stat().st_size,
        seconds=time.perf_counter() - t0,
        input_shape=fp32.input_shape,
        variant=variant,
        source=fp32.sha256,
        calibration=calibration,
    )
    _record(run_dir, model)
    return model


STATIC_VARIANT = "int8-static"


def quantize_int8_static(
    fp32: ExportedModel, run_dir: Path, batches: Callable[[], Sequence[torch.Tensor]], calibration: str
) -> ExportedModel:
    """Static int8 quantization (QDQ, u8s8, per-channel weights) of the fp32 file, calibrated (min-max) on
    `batches()`, the run's own letterboxed batches; `calibration` says which (the file is reused only for the same).
    Made once per run."""
    recorded = _load_recorded(run_dir).get(STATIC_VARIANT)
    found = _reusable(run_dir, recorded, fp32.input_shape, Path(fp32.path).stem)
    if found is not None and found.source == fp32.sha256 and found.calibration == calibration:
        return found
    import logging

    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    shaped = [b for b in batches() if list(b.shape) == fp32.input_shape]
    if not shaped:
        raise ValueError(f"no calibration batch of the exported input shape {fp32.input_shape}")

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.left = [{INPUT_NAME: b.numpy()} for b in shaped]

        def get_next(self) -> dict[str, np.ndarray] | None:
            return self.left.pop(0) if self.left else None

    source = run_dir / fp32.path
    out = source.with_name(source.stem + ".int8-static.onnx")
    t0 = time.perf_counter()
    previous = logging.getLogger().level
    logging.getLogger().setLevel(logging.ERROR)  # its advice to pre-process is printed on every call
    try:
        quantize_static(
            str(source),
            str(out),
            Reader(),
            quant_format=QuantFormat.QDQ,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            per_channel=True,
            nodes_to_exclude=head_nodes(onnx.load(str(source), load_external_data=False)),
        )
    finally:
        logging.getLogger().setLevel(previous)
    return _record_derived(run_dir, out, fp32, STATIC_VARIANT, t0, calibration)


def head_nodes(model: Any) -> list[str]:
    """The nodes of the last top-level layer (the detection head, `/model.N/...`), kept in fp32."""
    import re

    layers = {n.name: int(m.group(1)) for n in model.graph.node if (m := re.match(r"^/model\.(\d+)/", n.name))}
    last = max(layers.values(), default=None)
    return [name for name, layer in layers.items() if layer == last]
