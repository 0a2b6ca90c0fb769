"""YOLOv7 family: architecture against the official deploy cfgs' figures, fusing, hooks, outputs."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from hwprof.workload import yolov7 as y7
from hwprof.workload.yolov7_modules import Conv, RepConv

# From the official model (WongKinYiu/yolov7, cfg/deploy) built by its own code; see
# scripts/verify_yolov7_official.py for the side-by-side check.
LAYERS = {"yolov7": 106, "yolov7-tiny": 78, "yolov7x": 122}
PARAMS = {"yolov7": 37_620_125, "yolov7-tiny": 6_227_101, "yolov7x": 71_344_389}
PARAMS_FUSED = {"yolov7": 36_905_341, "yolov7-tiny": 6_219_709, "yolov7x": 71_311_741}


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def short_type(module: nn.Module) -> str:
    return str(module.type).rsplit(".", 1)[-1]


@pytest.fixture(scope="module")
def built() -> dict[str, y7.YOLOv7Model]:
    models = {}
    for name in y7.MODEL_NAMES:
        torch.manual_seed(0)
        models[name] = y7.build_yolov7(name).eval()
    return models


def randomize_batch_norms(model: nn.Module, seed: int = 1) -> None:
    """Non-trivial BN statistics, so that fusing is actually tested."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                assert m.running_mean is not None and m.running_var is not None
                m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
                m.bias.copy_(torch.randn(m.num_features, generator=gen) * 0.1)


def test_model_names() -> None:
    assert y7.MODEL_NAMES == ("yolov7", "yolov7-tiny", "yolov7x")
    assert y7.OUTPUT_FORMAT == "xywh_obj_cls"
    with pytest.raises(ValueError, match="unknown YOLOv7 model"):
        y7.build_yolov7("yolov9")


@pytest.mark.parametrize("name", y7.MODEL_NAMES)
def test_layer_list_and_attributes(built: dict[str, y7.YOLOv7Model], name: str) -> None:
    model = built[name]
    assert isinstance(model.model, nn.Sequential)
    assert len(model.model) == LAYERS[name]
    cfg_rows = model.yaml["backbone"] + model.yaml["head"]
    for i, (layer, row) in enumerate(zip(model.model, cfg_rows, strict=True)):
        assert layer.i == i
        assert layer.f == row[0]
        assert short_type(layer) == row[2].removeprefix("nn.")
        assert layer.type == f"{type(layer).__module__}.{type(layer).__qualname__}"
        assert layer.np == n_params(layer)
    assert model.stride.tolist() == [8.0, 16.0, 32.0]
    assert model.names[0] == "person" and model.names[79] == "toothbrush" and len(model.names) == 80
    assert model.yaml["nc"] == 80 and model.nc == 80
    layers: list[Any] = list(model.model)
    edges = {j % layer.i for layer in layers for j in ([layer.f] if isinstance(layer.f, int) else layer.f) if j != -1}
    assert sorted(set(model.save)) == sorted(edges)


def test_known_layers_yolov7(built: dict[str, y7.YOLOv7Model]) -> None:
    m = built["yolov7"].model
    expected: dict[int, tuple[str, Any]] = {
        0: ("Conv", -1),
        10: ("Concat", [-1, -3, -5, -6]),
        12: ("MP", -1),
        14: ("Conv", -3),
        51: ("SPPCSPC", -1),
        53: ("Upsample", -1),
        54: ("Conv", 37),
        80: ("Concat", [-1, -3, 63]),
        102: ("RepConv", 75),
        103: ("RepConv", 88),
        104: ("RepConv", 101),
        105: ("Detect", [102, 103, 104]),
    }
    for i, (kind, f) in expected.items():
        assert (short_type(m[i]), m[i].f) == (kind, f), i
    assert set(built["yolov7"].save) >= {24, 37, 51, 63, 75, 88, 101, 102, 103, 104}


def test_known_layers_tiny_and_x(built: dict[str, y7.YOLOv7Model]) -> None:
    tiny = built["yolov7-tiny"].model
    assert [short_type(tiny[i]) for i in (30, 31, 32, 33, 34)] == ["Conv", "SP", "SP", "SP", "Concat"]
    assert (tiny[30].f, tiny[32].f, tiny[33].f, tiny[34].f) == (-2, -2, -3, [-1, -2, -3, -4])
    assert isinstance(tiny[0].act, nn.LeakyReLU) and tiny[0].act.negative_slope == pytest.approx(0.1)
    assert (short_type(tiny[77]), tiny[77].f) == ("Detect", [74, 75, 76])
    x = built["yolov7x"].model
    assert (short_type(x[59]), short_type(x[118]), x[118].f) == ("SPPCSPC", "Conv", 87)
    assert (short_type(x[121]), x[121].f) == ("Detect", [118, 119, 120])
    assert not any(isinstance(layer, RepConv) for layer in x)


def test_batch_norm_and_detect_init(built: dict[str, y7.YOLOv7Model]) -> None:
    model = built["yolov7-tiny"]
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    assert bns and all(bn.eps == 1e-3 and bn.momentum == 0.03 for bn in bns)
    head: Any = model.model[-1]
    for conv, stride in zip(head.m, (8, 16, 32), strict=True):
        bias = conv.bias.detach().view(head.na, -1)
        prior = torch.log(torch.tensor(8 / (640 / stride) ** 2))
        assert (bias[:, 4] - prior).abs().max() < 0.2
        assert (bias[:, 5:].mean() - torch.log(torch.tensor(0.6 / 79.01))).abs() < 0.05
    assert torch.allclose(head.anchors * head.stride.view(-1, 1, 1), head.anchor_grid.view(3, 3, 2))


@pytest.mark.parametrize("name", y7.MODEL_NAMES)
def test_param_counts(built: dict[str, y7.YOLOv7Model], name: str) -> None:
    model = copy.deepcopy(built[name])
    assert n_params(model) == PARAMS[name]
    layers: list[Any] = list(model.model)
    assert sum(layer.np for layer in layers) == PARAMS[name]
    assert model.fuse() is model
    assert model.is_fused
    assert n_params(model) == PARAMS_FUSED[name]
    assert not any(isinstance(m, nn.BatchNorm2d) for m in model.modules())


@pytest.mark.parametrize("with_identity", [True, False])
def test_repconv_fuse_equivalence(with_identity: bool) -> None:
    torch.manual_seed(0)
    block = RepConv(16, 16 if with_identity else 24).eval()
    assert (block.rbr_identity is not None) == with_identity
    randomize_batch_norms(block)
    x = torch.randn(2, 16, 12, 10)
    with torch.no_grad():
        before = block(x)
        block.fuse()
        after = block(x)
    assert block.rbr_dense is None and block.rbr_1x1 is None and block.rbr_reparam is not None
    assert set(block.state_dict()) == {"rbr_reparam.weight", "rbr_reparam.bias"}
    assert torch.allclose(before, after, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize(("name", "size"), [("yolov7-tiny", 256), ("yolov7", 128)])
def test_fused_outputs_match_unfused(name: str, size: int) -> None:
    torch.manual_seed(0)
    model = y7.build_yolov7(name).eval()
    randomize_batch_norms(model)
    x = torch.rand(1, 3, size, size)
    with torch.no_grad():
        pred, raw = model(x)
        fused = copy.deepcopy(model).fuse()
        pred_f, raw_f = fused(x)
    assert any(isinstance(m, Conv) and m.fused for m in fused.modules())
    for a, b in zip(raw, raw_f, strict=True):
        assert torch.allclose(a, b, atol=1e-3, rtol=1e-3)
    assert torch.allclose(pred[..., 4:], pred_f[..., 4:], atol=1e-4)
    assert torch.allclose(pred[..., :4], pred_f[..., :4], atol=1e-2, rtol=1e-3)


def test_output_shapes_and_format(built: dict[str, y7.YOLOv7Model]) -> None:
    model = built["yolov7-tiny"]
    x = torch.rand(2, 3, 256, 320)
    with torch.no_grad():
        pred, raw = model(x)
    cells = [(32, 40), (16, 20), (8, 10)]
    assert pred.shape == (2, 3 * sum(h * w for h, w in cells), 85)
    assert [tuple(r.shape) for r in raw] == [(2, 3, h, w, 85) for h, w in cells]
    assert pred[..., 4:].min() >= 0 and pred[..., 4:].max() <= 1
    assert torch.allclose(pred[..., 4:], raw_cat_sigmoid(raw)[..., 4:])
    # Centres lie within about half a cell of the image; widths are positive.
    assert pred[..., 0].min() > -32 and pred[..., 0].max() < 320 + 32
    assert pred[..., 1].min() > -32 and pred[..., 1].max() < 256 + 32
    assert (pred[..., 2:4] > 0).all()


def raw_cat_sigmoid(raw: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([r.sigmoid().flatten(1, 3) for r in raw], 1)


def test_training_mode_returns_raw_levels() -> None:
    torch.manual_seed(0)
    model = y7.build_yolov7("yolov7-tiny", nc=3).train()
    out = model(torch.rand(2, 3, 128, 128))
    assert isinstance(out, list) and [tuple(o.shape) for o in out] == [
        (2, 3, 16, 16, 8),
        (2, 3, 8, 8, 8),
        (2, 3, 4, 4, 8),
    ]
    assert model.names == {0: "0", 1: "1", 2: "2"} and model.yaml["nc"] == 3


def test_hooks_fire_once_per_layer_per_forward(built: dict[str, y7.YOLOv7Model]) -> None:
    model = built["yolov7-tiny"]
    calls: list[tuple[str, int]] = []
    handles = []
    for layer in model.model:
        handles.append(layer.register_forward_pre_hook(lambda m, _i: calls.append(("pre", m.i))))
        handles.append(layer.register_forward_hook(lambda m, _i, _o: calls.append(("post", m.i))))
    try:
        with torch.no_grad():
            for _ in range(2):
                model(torch.rand(1, 3, 128, 128))
    finally:
        for h in handles:
            h.remove()
    one_pass = [(phase, i) for i in range(len(model.model)) for phase in ("pre", "post")]
    assert calls == one_pass * 2


def test_flops_tiny_fused_640(built: dict[str, y7.YOLOv7Model]) -> None:
    """Counted on the meta device: the same aten ops, no arithmetic."""
    model = copy.deepcopy(built["yolov7-tiny"]).fuse().to("meta")
    counter = FlopCounterMode(display=False)
    with counter, torch.inference_mode():
        model(torch.zeros(1, 3, 640, 640, device="meta"))
    assert counter.get_total_flops() / 1e9 == pytest.approx(13.70, rel=0.005)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "gflops"), [("yolov7", 104.5), ("yolov7x", 189.7)])
def test_flops_fused_640_cpu(name: str, gflops: float) -> None:
    torch.manual_seed(0)
    model = y7.build_yolov7(name).eval().fuse()
    counter = FlopCounterMode(display=False)
    with counter, torch.inference_mode():
        model(torch.zeros(1, 3, 640, 640))
    assert counter.get_total_flops() / 1e9 == pytest.approx(gflops, rel=0.005)


def _cfg_with(row: list[Any]) -> dict[str, Any]:
    cfg = y7.load_cfg("yolov7-tiny")
    cfg["backbone"][2] = row
    return cfg


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ([-1, 1, "eval", []], "unsupported module"),
        ([-1, 1, "Conv", [32, 1, 1, None, 1, "nn.LeakyReLU(__import__('os'))"]], "must be numbers"),
        ([-1, 1, "Conv", [32, 1, 1, None, 1, "nn.Module()"]], "unsupported cfg argument"),
        ([-1, 1, "IDetect", ["nc", "anchors"]], "unsupported module"),
    ],
)
def test_cfg_strings_are_never_evaluated(row: list[Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        y7.build_yolov7("yolov7-tiny", cfg=_cfg_with(row))


def test_build_from_cfg_dict_matches_named_build() -> None:
    torch.manual_seed(0)
    a = y7.build_yolov7("yolov7-tiny")
    torch.manual_seed(0)
    b = y7.build_yolov7("anything", cfg=y7.load_cfg("yolov7-tiny"))
    assert [k for k in a.state_dict()] == [k for k in b.state_dict()]
    assert all(torch.equal(v, b.state_dict()[k]) for k, v in a.state_dict().items())


def test_fold_implicit_head_matches_idetect() -> None:
    torch.manual_seed(0)
    conv = nn.Conv2d(16, 24, 1)
    ia = torch.randn(1, 16, 1, 1) * 0.02
    im = 1 + torch.randn(1, 24, 1, 1) * 0.02
    state = {
        "model.7.m.0.weight": conv.weight.detach(),
        "model.7.m.0.bias": conv.bias.detach(),  # type: ignore[union-attr]
        "model.7.ia.0.implicit": ia,
        "model.7.im.0.implicit": im,
        "model.7.anchors": torch.ones(1, 3, 2),
    }
    folded, did = y7.fold_implicit_head(state, 7)
    assert did and set(folded) == {"model.7.m.0.weight", "model.7.m.0.bias", "model.7.anchors"}
    x = torch.randn(2, 16, 5, 5)
    expected = conv(x + ia) * im
    got = nn.functional.conv2d(x, folded["model.7.m.0.weight"], folded["model.7.m.0.bias"])
    assert torch.allclose(expected, got, atol=1e-5)
    same, did = y7.fold_implicit_head({"model.7.m.0.weight": conv.weight}, 7)
    assert not did and set(same) == {"model.7.m.0.weight"}


def test_architecture_of() -> None:
    cfg = y7.load_cfg("yolov7x")
    assert y7.architecture_of(cfg) == "yolov7x"
    cfg["head"][-1][2] = "IDetect"
    assert y7.architecture_of(cfg) == "yolov7x"
    cfg["head"].pop()
    assert y7.architecture_of(cfg) is None


def test_a_compiled_model_compiles_once_and_decodes_as_eager() -> None:
    """The Detect head's grid cache, filled by the first compiled call, failed its guard at the second and Dynamo
    compiled the whole model again (Inductor: 9 s more on yolov7-tiny at 320); under compile the grid is made in
    the graph. A counting backend (no Inductor) sees one graph over three calls."""
    from torch._dynamo.testing import CompileCounter

    torch._dynamo.reset()
    torch.manual_seed(0)
    model = y7.build_yolov7("yolov7-tiny", nc=3).eval()
    counter = CompileCounter()
    compiled = torch.compile(model, backend=counter)
    image = torch.rand(1, 3, 96, 96)
    with torch.no_grad():
        outs = [compiled(image)[0] for _ in range(3)]
        eager = model(image)[0]
    assert counter.frame_count == 1, f"{counter.frame_count} compiles"
    assert all(torch.allclose(out, eager, atol=1e-5) for out in outs)
    torch._dynamo.reset()
