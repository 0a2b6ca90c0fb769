"""A seeded init that keeps the signal: every convolution scaled so that its output has unit variance.

Without --weights the model's seeded random init loses its signal layer by layer (yolov7-tiny at 320: conv
output std 0.29 at model.0, 2.7e-7 at model.76), so its head is a constant and no output check can see
what a precision or a runtime changes. This is a data-dependent init (LSUV, Mishkin and Matas 2016; per
channel as in weight normalisation's init, Salimans and Kingma 2016): after the seeded init and the fusing,
one forward over the run's first image (letterboxed as the pipeline does) in which each convolution, in
the order the forward calls it, has its output's per-channel mean and standard deviation measured and its
weights and bias rewritten so that the output has mean 0 and standard deviation 1. The detection head's
output convolutions keep their own prior bias (Detect's objectness and class priors) as the mean: only
their spread is set to 1, so the scores stay where the untrained model's own init puts them.

Every process of a run (each pass's worker, each advise worker) must build the same model to the bit. A
forward's float sums depend on the thread count and the kernels oneDNN picks, so the scaling is computed
once per run (the first process that builds the model) and saved in `<run>/model/` (per convolution a
scale per output channel and the new bias, float32); later processes apply the saved vectors to their
own seeded init (an element-wise multiply: the same bits everywhere).
"""

from __future__ import annotations

import hashlib
import io
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwprof.core.atomic import DiskFullError, atomic_write_bytes, atomic_write_text
from hwprof.schema.model_init import InitDoc
from hwprof.workload.layers import LayerTable, forward_with_hooks

if TYPE_CHECKING:
    from collections.abc import Sequence

    import torch

    from hwprof.core.config import RunConfig
    from hwprof.workload.layers import LayerRecorder
    from hwprof.workload.zoo import BuiltModel

MODEL_DIR = "model"
SCALE_FILE = "init_scale.pt"
SCALE_JSON = "init_scale.json"
METHOD = "unit variance"
FIXED_PARENTS = ("DFL",)
"""Modules whose convolution is not learned (ultralytics' DFL: the integral over bins): left as they are."""
MIN_STD = 1e-12
"""A channel whose output spread is below this (a constant channel) keeps its scale (1) and only moves its mean."""


@dataclass
class ConvScale:
    scale: torch.Tensor
    """Per output channel, float32: the weight is multiplied by it."""
    bias: torch.Tensor
    """Per output channel, float32: the new bias."""


def scaled_convs(module: torch.nn.Module) -> dict[str, tuple[torch.nn.Conv2d, bool]]:
    """name -> (convolution, whether it is a head output) for every learned Conv2d (not FIXED_PARENTS')."""
    import torch

    head: Any = module.model[-1] if hasattr(module, "model") else None  # type: ignore[index]
    head_ids: set[int] = set()
    if head is not None:
        for parent in head.modules():
            if isinstance(parent, torch.nn.ModuleList | torch.nn.Sequential):
                head_ids.update(id(c) for c in parent.children() if isinstance(c, torch.nn.Conv2d))
    fixed = {id(c) for parent in module.modules() if type(parent).__name__ in FIXED_PARENTS for c in parent.children()}
    return {
        name: (m, id(m) in head_ids)
        for name, m in module.named_modules()
        if isinstance(m, torch.nn.Conv2d) and id(m) not in fixed
    }


def apply_scale(conv: torch.nn.Conv2d, entry: ConvScale) -> None:
    """The one way a scale reaches a convolution, in the process that computed it and in those that load it."""
    import torch

    with torch.no_grad():
        conv.weight.mul_(entry.scale.view(-1, 1, 1, 1))
        if conv.bias is None:
            conv.bias = torch.nn.Parameter(entry.bias.clone())
        else:
            conv.bias.copy_(entry.bias)


def compute_scales(module: torch.nn.Module, batch: torch.Tensor, beside: Sequence[Any] = ()) -> dict[str, ConvScale]:
    """One forward: each convolution, as the forward reaches it, scaled (and applied) so its output has
    per-channel mean 0 (a head output: its own bias) and standard deviation 1. `beside`: other hooks' handles,
    which see the same forward and are removed after it (the layer table's)."""
    import torch

    convs = scaled_convs(module)
    scales: dict[str, ConvScale] = {}
    handles = []

    def hook(conv: torch.nn.Module, _inputs: Any, out: torch.Tensor, name: str, is_head: bool) -> torch.Tensor:
        if name in scales:
            return out
        std, mean = torch.std_mean(out.detach(), dim=(0, 2, 3))
        scale = torch.where(std > MIN_STD, 1.0 / std.clamp_min(MIN_STD), torch.ones_like(std))
        own: Any = conv.bias
        bias = own.detach().clone() if own is not None else torch.zeros_like(mean)
        target = bias if is_head else torch.zeros_like(mean)
        entry = ConvScale(scale, (bias - mean) * scale + target)
        apply_scale(conv, entry)  # type: ignore[arg-type]
        scales[name] = entry
        return (out - mean.view(1, -1, 1, 1)).mul_(scale.view(1, -1, 1, 1)).add_(target.view(1, -1, 1, 1))

    for name, (conv, is_head) in convs.items():
        handles.append(conv.register_forward_hook(lambda m, i, o, n=name, h=is_head: hook(m, i, o, n, h)))
    forward_with_hooks(module, batch, [*handles, *beside])
    return scales


def conv_output_std(module: torch.nn.Module, batch: torch.Tensor) -> dict[str, float]:
    """Each convolution's output standard deviation on this batch (what the init leaves of the signal)."""

    stds: dict[str, float] = {}
    handles = [
        conv.register_forward_hook(lambda _m, _i, out, n=name: stds.__setitem__(n, float(out.double().std())))
        for name, (conv, _) in scaled_convs(module).items()
    ]
    forward_with_hooks(module, batch, handles)
    return stds


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _load(run_dir: Path, model: str, seed: int, words: str) -> tuple[dict[str, ConvScale], InitDoc] | None:
    """The run's saved scales when they are this model's, seed's and input's and the file is unchanged; else
    None (then they are computed again and saved over: a later collect into the same folder)."""
    import torch

    try:
        doc = InitDoc.from_json(json.loads((run_dir / MODEL_DIR / SCALE_JSON).read_text()), SCALE_JSON)
        path = run_dir / MODEL_DIR / SCALE_FILE
        if (doc.model, doc.seed, doc.calibrated_on) != (model, seed, words) or doc.sha256 != _sha256(path):
            return None
        saved = torch.load(path, weights_only=True)
        return {name: ConvScale(v["scale"], v["bias"]) for name, v in saved.items()}, doc
    except (OSError, ValueError, KeyError, TypeError, RuntimeError):
        return None


def _save(run_dir: Path, scales: dict[str, ConvScale], doc: InitDoc) -> None:
    """Saved for the run's later processes. Serialised in memory first, so that a full disk or the file-size
    limit reaches the writer as the OSError it is (torch's zip writer reports it as "unexpected pos"); a
    save that fails so is recorded, and each later process computes its own scales (equal but for rounding
    where its thread count differs): the measurement goes on, and the next write says what is full."""
    import torch

    folder = run_dir / MODEL_DIR
    buffer = io.BytesIO()
    torch.save({n: {"scale": s.scale, "bias": s.bias} for n, s in scales.items()}, buffer)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(folder / SCALE_FILE, buffer.getvalue())
        doc.update(file=f"{MODEL_DIR}/{SCALE_FILE}", sha256=_sha256(folder / SCALE_FILE))
        atomic_write_text(folder / SCALE_JSON, json.dumps(doc.to_json(), indent=1))
    except DiskFullError as exc:
        doc.update(file=None, sha256=None, not_saved=str(exc))


def keep_signal(
    module: torch.nn.Module,
    batch: torch.Tensor,
    batch_words: str,
    model: str,
    seed: int,
    run_dir: Path | None,
    recorder: LayerRecorder | None = None,
) -> InitDoc:
    """Scale `module` (fused, seeded, in place) to unit variance: with the run's saved scales if it has them,
    else computed on `batch` (described by `batch_words`) and saved in run_dir. What was done, as model.json
    and run.json record it. `recorder`: a layer table's hooks, filled by the forward that computes the scales
    (its parameters counted after them) and removed either way."""
    started = time.perf_counter()
    loaded = _load(run_dir, model, seed, batch_words) if run_dir is not None else None
    convs = scaled_convs(module)
    if loaded is not None:
        if recorder is not None:
            recorder.remove()
        scales, doc = loaded
        missing = sorted(set(convs) - set(scales))
        if missing:
            raise ValueError(f"{run_dir}/{MODEL_DIR}/{SCALE_JSON}: no scale for {missing[0]}; fix: delete the file")
        for name, (conv, _) in convs.items():
            apply_scale(conv, scales[name])
        doc.update(computed_here=False, seconds=round(time.perf_counter() - started, 3))
        return doc
    scales = compute_scales(module, batch, recorder.handles if recorder is not None else ())
    if recorder is not None:
        recorder.handles.clear()  # removed by the forward
        recorder.recount(module)  # a bias-less convolution got its bias from its scale
    doc = InitDoc.of(
        method=METHOD,
        text=f"seeded (seed {seed}), convolutions scaled to unit variance on {batch_words}",
        calibrated_on=batch_words,
        model=model,
        seed=seed,
        convolutions=len(scales),
        computed_here=True,
        compute_seconds=round(time.perf_counter() - started, 3),
    )
    if run_dir is not None:
        _save(run_dir, scales, doc)
    doc.update(seconds=round(time.perf_counter() - started, 3))
    return doc


def calibration_batch(config: RunConfig, images: list[Path], built: BuiltModel) -> tuple[torch.Tensor, str]:
    """The run's first image, letterboxed as the pipeline does, and its description in words (one image
    whatever the batch: a variant with another batch size builds the same model)."""
    import dataclasses

    from hwprof.core.markers import MarkerBus
    from hwprof.workload.pipeline import Pipeline

    pipeline = Pipeline(dataclasses.replace(config, batch=1), MarkerBus(), images, built)
    batch = pipeline.sample_batch()
    names = pipeline.input_names()
    return batch, f"the run's first image ({names}, letterboxed to {batch.shape[2]}x{batch.shape[3]})"


def build_for_run(config: RunConfig, images: list[Path], run_dir: Path | None) -> BuiltModel:
    """The run's model: built from its weights, or seeded and scaled to keep its signal (the run's saved
    scales when an earlier process of the run saved them). Where the scales are computed here, the forward that
    computes them also records the layer table (built.layers): the first pass's model.json needs no forward of its
    own for it (0.4 s at yolov7 640 on the 2-vCPU EPYC)."""
    from hwprof.workload.layers import record_layers
    from hwprof.workload.zoo import build_model

    built = build_model(config.model, config.weights, config.seed)
    if built.weights is None:
        batch, words = calibration_batch(config, images, built)
        recorder = record_layers(built.module, config.depth)
        built.init = keep_signal(built.module, batch, words, config.model, config.seed, run_dir, recorder)
        if recorder.seen:
            built.layers = LayerTable(list(batch.shape), config.depth, recorder.rows)
    return built
