"""The report's kernel sections: native kernels per layer on every thread and over the model
(perf sampling), aten kernels per layer (torch.profiler) and py-spy's native frames."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hwprof.render.columns import Column, GroupRow, build
from hwprof.render.fmt import ms, num, pct, sig
from hwprof.render.tables import MISSING, Brief, Col, TableSpec

if TYPE_CHECKING:
    from hwprof.analysis.layers.stats import LayerReport, LayerStat
    from hwprof.analysis.run_analysis import Analysis
    from hwprof.core.native_view import NativeKernel, NativeLayer, NativeView

KERNEL_LAYERS = 5
NATIVE_LAYERS = 8
NATIVE_PER_LAYER = 4
MODEL_KERNELS = 12
KERNEL_LAYER_NAMES = 3
KERNEL_CAUSE_SHOWN = 0.05
"""A layer's kernel share from which its cell names the cause."""


def _layer_label(layer: LayerStat) -> str:
    return f"{layer.index} {layer.type}" if layer.depth == 1 else f"{layer.name.removeprefix('model.')} {layer.type}"


def _kernel_layers(rep: LayerReport) -> list[LayerStat]:
    return rep.top(KERNEL_LAYERS) or rep.top(KERNEL_LAYERS, "flops")


@dataclass(frozen=True)
class _LayerKernel(GroupRow):
    """A row of the kernels-per-layer table: one of a layer's kernels; the layer's own cells on its first."""

    layer: LayerStat
    native: NativeLayer
    kernel: NativeKernel


LAYER_KERNEL_COLUMNS: list[Column[LayerReport, _LayerKernel]] = [
    Column(Col("layer", "left", max_width=16), lambda r: r.group_cell(_layer_label(r.layer))),
    Column(
        Col("samples", priority=3),
        lambda r: r.group_cell(f"{r.native.samples}{' (few)' if r.native.too_few else ''}"),
    ),
    Column(Col("wait", priority=1), lambda r: r.group_cell(pct(r.native.openmp_share))),
    Column(Col("in kernel", "left", priority=1, max_width=22), lambda r: r.group_cell(kernel_cell(r.native))),
    Column(Col("kernel", "left", max_width=46), lambda r: r.kernel.name),
    Column(Col("kind", "left", priority=2, max_width=14), lambda r: r.kernel.kind),
    Column(Col("share"), lambda r: pct(r.kernel.share)),
    Column(
        Col("CPI"),
        lambda r: num(r.kernel.cpi),
        lambda rep: any(k.cpi is not None for r in rep.layers if r.native for k in r.native.kernels),
    ),
]


def kernel_cell(native: NativeLayer) -> str:
    """The layer's share in the kernel and, where it is worth reading, the cause of most of it:
    "67% (faults 89%)"."""
    kernel = native.kernel_space_share
    if not kernel:
        return pct(0.0)
    if kernel < KERNEL_CAUSE_SHOWN or not native.causes:
        return pct(kernel)
    top = native.causes[0]
    return f"{pct(kernel)} ({top.cause.removeprefix('page ')} {pct(top.share / kernel)})"


def kernel_causes_note(view: NativeView) -> str:
    """forward's kernel-space share by cause, and how the causes were found."""
    fwd = view.forward
    split = ", ".join(f"{c.cause} {pct(c.share)}" for c in fwd.causes)
    if fwd.by_leaf <= 0.0:
        how = "by callchain: the kernel entry each sample came in by"
    elif view.callchains:
        how = f"by callchain, {pct(fwd.by_leaf)} of forward by leaf symbol where a sample had none"
    else:
        how = "guessed from leaf symbols: this perf.data has no callchains, recorded without -g"
    return (
        f"in kernel = the layer's share in kernel space (cause of most of it, share of the kernel's); forward: "
        f"{pct(fwd.kernel_space_share)} in the kernel{': ' + split if split else ''} ({how})"
    )


def native_kernels_spec(a: Analysis) -> TableSpec | None:
    """Per layer (top by time): its most sampled kernels over all threads, and how long its threads waited."""
    rep = a.layers
    if not rep.layers:
        return None
    view = rep.native
    title = "kernels per layer (all threads)"
    if view is None:
        return TableSpec(title, [], [], [f"native kernels: {rep.missing['native'].note()}"])
    layers = [r for r in (rep.top(NATIVE_LAYERS) or rep.top(NATIVE_LAYERS, "flops")) if r.native is not None]
    rows_src = [
        _LayerKernel(first=i == 0, layer=layer, native=layer.native, kernel=k)
        for layer in layers
        if layer.native is not None
        for i, k in enumerate(layer.native.kernels[:NATIVE_PER_LAYER])
    ]
    cols, rows = build(LAYER_KERNEL_COLUMNS, rep, rows_src)
    methods = [
        f"perf record on {view.sampling_event} at {view.rate_hz:.0f} Hz per thread in the kernels pass, every "
        f"thread, {view.iterations} measured iterations; a sample belongs to the layer the pipeline thread was "
        "in at its time (self: the innermost layer); share = of the layer's sampled time over all threads; "
        "wait = share in the OpenMP runtime (threads waiting or spinning: lost parallelism)"
    ]
    notes = [
        f"forward: {view.forward.samples} samples, {pct(view.forward.openmp_share)} OpenMP runtime, "
        f"{pct(view.forward.kernel_space_share)} kernel space",
        kernel_causes_note(view),
    ]
    few = [r for r in layers if r.native is not None and r.native.too_few]
    if few:
        notes.append(
            f"(few): under {view.min_samples} samples for a layer above 1% of forward: its shares are rough; "
            "raise --iters or --perf-rate"
        )
    if "native_cpi" in rep.missing:
        notes.append(f"CPI per kernel: {rep.missing['native_cpi'].note()}")
    title = f"{title}, top {len(layers)} layers by time"
    return TableSpec(title, cols, rows, notes, methods=methods, brief=Brief(groups=4, rows=3))


@dataclass(frozen=True)
class _ModelKernel:
    """A row of the kernels-over-the-model table: the kernel, and the layers it ran in as text."""

    kernel: NativeKernel
    layers: str


def _kernel_layers_text(k: NativeKernel, label: dict[str, str]) -> str:
    where = ", ".join(f"{label.get(name, name)} {100 * share:.0f}%" for name, share in k.layers[:KERNEL_LAYER_NAMES])
    if len(k.layers) > KERNEL_LAYER_NAMES:
        where += f", +{len(k.layers) - KERNEL_LAYER_NAMES} more"
    return where


MODEL_KERNEL_COLUMNS: list[Column[NativeView, _ModelKernel]] = [
    Column(Col("kernel", "left", max_width=46), lambda r: r.kernel.name),
    Column(Col("kind", "left", priority=2, max_width=14), lambda r: r.kernel.kind),
    Column(Col("share"), lambda r: pct(r.kernel.share)),
    Column(Col("CPI"), lambda r: num(r.kernel.cpi), lambda view: any(k.cpi is not None for k in view.kernels)),
    Column(Col("samples", priority=3), lambda r: str(r.kernel.samples)),
    Column(Col("layers (share of the kernel's samples)", "left", priority=1, max_width=40), lambda r: r.layers),
]


def native_model_spec(a: Analysis) -> TableSpec | None:
    """The model's most sampled kernels over forward, with the layers they ran in."""
    rep = a.layers
    view = rep.native
    if view is None or not view.kernels:
        return None
    label = {r.name: str(r.index) if r.depth == 1 else r.name.removeprefix("model.") for r in rep.layers}
    rows_src = [_ModelKernel(k, _kernel_layers_text(k, label)) for k in view.kernels[:MODEL_KERNELS]]
    cols, rows = build(MODEL_KERNEL_COLUMNS, view, rows_src)
    methods = ["share of forward's sampled time over all threads (kernels pass)"]
    title = f"kernels over the model, top {len(rows)} of {len(view.kernels)}"
    return TableSpec(title, cols, rows, methods=methods, brief=Brief(groups=6))


def kernels_spec(a: Analysis) -> TableSpec | None:
    rep = a.layers
    if not rep.layers:
        return None
    cols = [
        Col("layer", "left", max_width=16),
        Col("aten op", "left", max_width=28),
        Col("oneDNN impl", "left", priority=2, max_width=26),
        Col("ms/iter"),
        Col("calls", priority=1),
        Col("share"),
    ]
    rows = []
    layers = _kernel_layers(rep)
    for layer in layers:
        for i, k in enumerate(layer.kernels):
            rows.append(
                [
                    f"{layer.index} {layer.type}" if i == 0 else "",
                    k.name.removeprefix("aten::"),
                    k.label or MISSING,
                    ms(k.self_ms),
                    sig(k.calls),
                    pct(k.share),
                ]
            )
    notes, methods = [], []
    if "kernels" in rep.missing:
        notes.append(f"kernels: {rep.missing['kernels'].note()}")
        cols, rows = [], []
    else:
        methods.append(
            "torch.profiler in the trace pass: aten self time on the calling thread per iteration (not "
            "scaled); share of the layer's aten time; oneDNN impl from ONEDNN_VERBOSE where matched"
        )
    title = f"hotspot kernels of the top {len(layers)} layers" if layers else "hotspot kernels per layer"
    return TableSpec(title, cols, rows, notes, methods=methods, brief=Brief(groups=4, rows=2))


def frames_spec(a: Analysis) -> TableSpec | None:
    rep = a.layers
    if not rep.layers:
        return None
    cols = [
        Col("layer", "left", max_width=16),
        Col("native frame (py-spy)", "left", max_width=48),
        Col("share"),
        Col("python", priority=2),
        Col("waiting", priority=1),
    ]
    rows = []
    layers = _kernel_layers(rep)
    for layer in layers:
        for i, f in enumerate(layer.frames):
            shares = layer.frame_shares
            rows.append(
                [
                    f"{layer.index} {layer.type}" if i == 0 else "",
                    f.function,
                    pct(f.share),
                    pct(shares.get("python")) if i == 0 else "",
                    pct(shares.get("waiting")) if i == 0 else "",
                ]
            )
    notes, methods = [], []
    if "frames" in rep.missing:
        notes.append(f"native frames: {rep.missing['frames'].note()}")
        cols, rows = [], []
    else:
        methods.append(
            "py-spy samples of the main thread in the trace pass; share of the layer's sampled time by "
            "leaf frame; python / waiting = leaf is a Python frame / OpenMP wait or blocking call"
        )
    title = f"hottest native frames of the top {len(layers)} layers" if layers else "hottest native frames per layer"
    return TableSpec(title, cols, rows, notes, methods=methods)
