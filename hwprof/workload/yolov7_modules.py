"""Building blocks of the YOLOv7 deploy architectures, written for this project.

The class names (Conv, Concat, MP, SP, SPPCSPC, RepConv, Detect) and the names and shapes of
their parameters and buffers are those of the official WongKinYiu/yolov7 code, so that a state
dict moves between the two without renaming. The code itself is this project's own.

Every BatchNorm2d is created with eps=1e-3 and momentum=0.03, the values the official model
gets from its initialize_weights(); eps is not stored in checkpoints, so it must be right here
for official weights to reproduce official outputs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

BN_EPS = 1e-3
BN_MOMENTUM = 0.03


def batch_norm(channels: int) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(channels, eps=BN_EPS, momentum=BN_MOMENTUM)


def autopad(k: int, p: int | None = None) -> int:
    """'Same' padding for an odd kernel unless p is given."""
    return k // 2 if p is None else p


def activation(act: bool | nn.Module) -> nn.Module:
    """True: SiLU (the YOLOv7 default); a module: that module; False: identity."""
    if isinstance(act, nn.Module):
        return act
    return nn.SiLU() if act else nn.Identity()


def fold_batch_norm(
    weight: torch.Tensor, bias: torch.Tensor | None, bn: nn.BatchNorm2d
) -> tuple[torch.Tensor, torch.Tensor]:
    """Kernel and bias of a convolution followed by `bn` in eval mode, as one convolution."""
    assert bn.running_var is not None and bn.running_mean is not None
    scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    folded_weight = weight * scale.reshape(-1, 1, 1, 1)
    conv_bias = torch.zeros_like(bn.running_mean) if bias is None else bias
    folded_bias = bn.bias + (conv_bias - bn.running_mean) * scale
    return folded_weight, folded_bias


def _conv_with_bias(like: nn.Conv2d, weight: torch.Tensor, bias: torch.Tensor) -> nn.Conv2d:
    conv = nn.Conv2d(
        like.in_channels,
        like.out_channels,
        like.kernel_size,  # type: ignore[arg-type]
        like.stride,  # type: ignore[arg-type]
        like.padding,  # type: ignore[arg-type]
        like.dilation,  # type: ignore[arg-type]
        like.groups,
        bias=True,
        device=weight.device,
        dtype=weight.dtype,
    )
    conv.weight = nn.Parameter(weight.detach().clone(), requires_grad=like.weight.requires_grad)
    conv.bias = nn.Parameter(bias.detach().clone(), requires_grad=like.weight.requires_grad)
    return conv


def _conv_bn(branch: nn.Sequential) -> tuple[nn.Conv2d, nn.BatchNorm2d]:
    conv, bn = branch[0], branch[1]
    assert isinstance(conv, nn.Conv2d) and isinstance(bn, nn.BatchNorm2d)
    return conv, bn


class Conv(nn.Module):
    """Conv2d (no bias) + BatchNorm2d + activation; after fuse(), Conv2d with bias + activation."""

    def __init__(
        self,
        c1: int,
        c2: int,
        k: int = 1,
        s: int = 1,
        p: int | None = None,
        g: int = 1,
        act: bool | nn.Module = True,
    ) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, autopad(k, p), groups=g, bias=False)
        self.bn: nn.BatchNorm2d | None = batch_norm(c2)
        self.act = activation(act)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        if self.bn is not None:
            y = self.bn(y)
        return self.act(y)

    @property
    def fused(self) -> bool:
        return self.bn is None

    @torch.no_grad()
    def fuse(self) -> None:
        if self.bn is None:
            return
        weight, bias = fold_batch_norm(self.conv.weight, self.conv.bias, self.bn)
        self.conv = _conv_with_bias(self.conv, weight, bias)
        self.bn = None


class Concat(nn.Module):
    def __init__(self, dimension: int = 1) -> None:
        super().__init__()
        self.d = dimension

    def forward(self, x: Sequence[torch.Tensor]) -> torch.Tensor:
        return torch.cat(list(x), self.d)


class MP(nn.Module):
    """Max-pool that downsamples by k (kernel k, stride k)."""

    def __init__(self, k: int = 2) -> None:
        super().__init__()
        self.m = nn.MaxPool2d(kernel_size=k, stride=k)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.m(x)


class SP(nn.Module):
    """Max-pool with 'same' padding (the SPP branches of yolov7-tiny)."""

    def __init__(self, k: int = 3, s: int = 1) -> None:
        super().__init__()
        self.m = nn.MaxPool2d(kernel_size=k, stride=s, padding=k // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.m(x)


class SPPCSPC(nn.Module):
    """Spatial pyramid pooling inside a cross-stage-partial block (YOLOv7 neck)."""

    def __init__(
        self,
        c1: int,
        c2: int,
        n: int = 1,
        shortcut: bool = False,
        g: int = 1,
        e: float = 0.5,
        k: Sequence[int] = (5, 9, 13),
    ) -> None:
        super().__init__()
        hidden = int(2 * c2 * e)
        self.cv1 = Conv(c1, hidden, 1, 1)
        self.cv2 = Conv(c1, hidden, 1, 1)
        self.cv3 = Conv(hidden, hidden, 3, 1)
        self.cv4 = Conv(hidden, hidden, 1, 1)
        self.m = nn.ModuleList(nn.MaxPool2d(kernel_size=size, stride=1, padding=size // 2) for size in k)
        self.cv5 = Conv(4 * hidden, hidden, 1, 1)
        self.cv6 = Conv(hidden, hidden, 3, 1)
        self.cv7 = Conv(2 * hidden, c2, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x1 = self.cv4(self.cv3(self.cv1(x)))
        pooled = [x1, *(pool(x1) for pool in self.m)]
        y1 = self.cv6(self.cv5(torch.cat(pooled, 1)))
        y2 = self.cv2(x)
        return self.cv7(torch.cat((y1, y2), 1))


class RepConv(nn.Module):
    """RepVGG block: 3x3 conv+BN, 1x1 conv+BN and (when shapes allow) a BN identity branch, summed.

    fuse() re-parameterises the branches into the single 3x3 convolution `rbr_reparam`.
    """

    def __init__(
        self,
        c1: int,
        c2: int,
        k: int = 3,
        s: int = 1,
        p: int | None = None,
        g: int = 1,
        act: bool | nn.Module = True,
        deploy: bool = False,
    ) -> None:
        super().__init__()
        if k != 3 or autopad(k, p) != 1:
            raise ValueError(f"RepConv needs a 3x3 kernel with padding 1, got k={k}, p={p}")
        self.deploy = deploy
        self.groups = g
        self.in_channels = c1
        self.out_channels = c2
        self.act = activation(act)
        self.rbr_identity: nn.BatchNorm2d | None = None
        self.rbr_dense: nn.Sequential | None = None
        self.rbr_1x1: nn.Sequential | None = None
        self.rbr_reparam: nn.Conv2d | None = None
        if deploy:
            self.rbr_reparam = nn.Conv2d(c1, c2, k, s, 1, groups=g, bias=True)
        else:
            if c1 == c2 and s == 1:
                self.rbr_identity = batch_norm(c1)
            self.rbr_dense = nn.Sequential(nn.Conv2d(c1, c2, k, s, 1, groups=g, bias=False), batch_norm(c2))
            self.rbr_1x1 = nn.Sequential(nn.Conv2d(c1, c2, 1, s, 0, groups=g, bias=False), batch_norm(c2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.rbr_reparam is not None:
            return self.act(self.rbr_reparam(x))
        assert self.rbr_dense is not None and self.rbr_1x1 is not None
        y = self.rbr_dense(x) + self.rbr_1x1(x)
        if self.rbr_identity is not None:
            y = y + self.rbr_identity(x)
        return self.act(y)

    @property
    def fused(self) -> bool:
        return self.rbr_reparam is not None

    def _identity_kernel(self, like: torch.Tensor) -> torch.Tensor:
        per_group = self.in_channels // self.groups
        kernel = torch.zeros(self.in_channels, per_group, 3, 3, dtype=like.dtype, device=like.device)
        for channel in range(self.in_channels):
            kernel[channel, channel % per_group, 1, 1] = 1.0
        return kernel

    @torch.no_grad()
    def equivalent_kernel_bias(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The single 3x3 kernel and bias that compute the sum of the branches (eval mode)."""
        assert self.rbr_dense is not None and self.rbr_1x1 is not None
        dense_conv, dense_bn = _conv_bn(self.rbr_dense)
        one_conv, one_bn = _conv_bn(self.rbr_1x1)
        kernel, bias = fold_batch_norm(dense_conv.weight, None, dense_bn)
        kernel_1x1, bias_1x1 = fold_batch_norm(one_conv.weight, None, one_bn)
        kernel = kernel + F.pad(kernel_1x1, [1, 1, 1, 1])
        bias = bias + bias_1x1
        if self.rbr_identity is not None:
            kernel_id, bias_id = fold_batch_norm(self._identity_kernel(kernel), None, self.rbr_identity)
            kernel = kernel + kernel_id
            bias = bias + bias_id
        return kernel, bias

    @torch.no_grad()
    def fuse(self) -> None:
        if self.rbr_reparam is not None:
            return
        assert self.rbr_dense is not None
        kernel, bias = self.equivalent_kernel_bias()
        self.rbr_reparam = _conv_with_bias(_conv_bn(self.rbr_dense)[0], kernel, bias)
        self.rbr_dense = None
        self.rbr_1x1 = None
        self.rbr_identity = None
        self.deploy = True


class Detect(nn.Module):
    """Anchor-based YOLO head: one 1x1 conv per level, decoded to boxes in input pixels.

    Training mode returns the raw per-level tensors, shape (batch, na, ny, nx, 5 + nc). Eval mode
    returns (pred, raw): pred (batch, sum(na * ny * nx), 5 + nc) with xywh in input pixels and
    sigmoid objectness and class scores.

    Buffers as in the official code: `anchors` (nl, na, 2) in grid units (pixels / stride) and
    `anchor_grid` (nl, 1, na, 1, 1, 2) in pixels. `stride` is a non-persistent buffer, so it follows
    .to() but is not part of the state dict (the official model keeps it as a plain attribute).
    """

    stride: torch.Tensor
    anchors: torch.Tensor
    anchor_grid: torch.Tensor

    def __init__(
        self,
        nc: int = 80,
        anchors: Sequence[Sequence[float]] = (),
        ch: Sequence[int] = (),
        strides: Sequence[float] | None = None,
    ) -> None:
        super().__init__()
        self.nc = nc
        self.no = nc + 5
        self.nl = len(anchors)
        self.na = len(anchors[0]) // 2
        if len(ch) != self.nl:
            raise ValueError(f"Detect has {self.nl} anchor levels but {len(ch)} inputs")
        pixels = torch.tensor(anchors, dtype=torch.float32).view(self.nl, -1, 2)
        stride = torch.tensor(strides if strides is not None else [0.0] * self.nl, dtype=torch.float32)
        self.register_buffer("stride", stride, persistent=False)
        if strides is not None:
            area = pixels.prod(-1).view(-1)
            if torch.sign(area[-1] - area[0]) != torch.sign(stride[-1] - stride[0]):
                pixels = pixels.flip(0)
            anchors_grid_units = pixels / stride.view(-1, 1, 1)
        else:
            anchors_grid_units = pixels.clone()
        self.register_buffer("anchors", anchors_grid_units)
        self.register_buffer("anchor_grid", pixels.clone().view(self.nl, 1, -1, 1, 1, 2))
        self.m = nn.ModuleList(nn.Conv2d(c, self.no * self.na, 1) for c in ch)
        self._grids: dict[tuple[int, int, int, torch.device, torch.dtype], torch.Tensor] = {}

    @torch.no_grad()
    def initialize_biases(self) -> None:
        """Prior objectness (about 8 objects per 640 image) and class scores (YOLOv5 / RetinaNet style)."""
        for conv, stride in zip(self.m, self.stride.tolist(), strict=True):
            assert isinstance(conv, nn.Conv2d) and conv.bias is not None
            bias = conv.bias.view(self.na, -1)
            bias[:, 4] += math.log(8 / (640 / stride) ** 2)
            bias[:, 5:] += math.log(0.6 / (self.nc - 0.99))

    def _grid(self, level: int, ny: int, nx: int, like: torch.Tensor) -> torch.Tensor:
        """The cell offsets of a level, cached per shape in eager mode. Under torch.compile they are made inside
        the graph: a cache the first compiled call filled failed its guard at the second, and Inductor compiled
        the whole model again (yolov7-tiny at 320: 9 s more, outside the first forward that advise times)."""
        compiling = torch.compiler.is_compiling()
        key = (level, ny, nx, like.device, like.dtype)
        grid = None if compiling else self._grids.get(key)
        if grid is None:
            yv, xv = torch.meshgrid(
                torch.arange(ny, device=like.device, dtype=like.dtype),
                torch.arange(nx, device=like.device, dtype=like.dtype),
                indexing="ij",
            )
            grid = torch.stack((xv, yv), 2).view(1, 1, ny, nx, 2)
            if like.device.type != "meta" and not compiling:
                self._grids[key] = grid
        return grid

    def forward(self, x: Sequence[torch.Tensor]) -> list[torch.Tensor] | tuple[torch.Tensor, list[torch.Tensor]]:
        raw: list[torch.Tensor] = []
        decoded: list[torch.Tensor] = []
        for level in range(self.nl):
            out = self.m[level](x[level])
            bs, _, ny, nx = out.shape
            out = out.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
            raw.append(out)
            if self.training:
                continue
            y = out.sigmoid()
            xy, wh, scores = y.split((2, 2, self.nc + 1), dim=4)
            stride = self.stride[level].to(device=y.device, dtype=y.dtype)
            xy = (xy * 2.0 - 0.5 + self._grid(level, ny, nx, y)) * stride
            wh = (wh * 2.0) ** 2 * self.anchor_grid[level].to(y.dtype)
            decoded.append(torch.cat((xy, wh, scores), dim=4).view(bs, -1, self.no))
        if self.training:
            return raw
        return torch.cat(decoded, 1), raw
