"""The report's tables as polars DataFrames, made from the same analysis the report prints (run_analysis.analyse).

Each table holds every row the analysis has (the report prints the top ones), with raw values: times in ms,
shares as fractions (0.25 = 25%), percentages of a peak in % (`pct_*`), bytes in B, FLOPs as counts, energy in
J. A figure that was not measured is null, never 0; `hwprof.Run.why(column_or_table)` says why.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, NotRequired, TypedDict

import polars as pl

from hwprof.analysis.advice.output import OutputCheck
from hwprof.analysis.advice.speedup import Speedup
from hwprof.analysis.advice.table import AdviceRow, LayerDelta
from hwprof.analysis.finding import Finding
from hwprof.analysis.layers.memory import LayerMemory
from hwprof.analysis.layers.sources import Frame, Kernel
from hwprof.analysis.layers.stats import LayerStat
from hwprof.analysis.paired_cost import PassCostFigure
from hwprof.analysis.stages import StageRow
from hwprof.analysis.types import TypeStat
from hwprof.api.dtypes import field_dtypes, table
from hwprof.core.native_view import NativeKernel
from hwprof.render.advice.export import COLUMNS as ADVICE_COLUMNS
from hwprof.render.advice.export import LAYERS as ADVICE_LAYERS
from hwprof.render.advice.export import advice_csv_rows
from hwprof.render.export import CSV_ATTRIBUTES, CSV_COLUMNS, layer_table

if TYPE_CHECKING:
    from hwprof.analysis.overhead import PassCost
    from hwprof.analysis.roofline import Roof
    from hwprof.analysis.run_analysis import Analysis, RooflineSummary


def stages(a: Analysis) -> pl.DataFrame:
    """One row per pipeline stage (load, preprocess, forward, postprocess, iteration) of the clean timing pass."""
    dtypes = field_dtypes(StageRow)
    return table([r.to_dict() for r in a.stages.rows], list(dtypes), dtypes)


def layers(a: Analysis) -> pl.DataFrame:
    """layers.csv as a table: its columns in its order (every `<collector>.<metric>` included), typed."""
    columns, rows = layer_table(a)
    stat = field_dtypes(LayerStat)
    dtypes = {c: stat[CSV_ATTRIBUTES.get(c, c)] for c in CSV_COLUMNS}
    dtypes |= {f"top_kernel{k}": v for k, v in _renamed(Kernel, {"name": "", "label": "_label", "share": "_share"})}
    dtypes |= {f"top_frame{k}": v for k, v in _renamed(Frame, {"function": "", "share": "_share"})}
    dtypes |= {
        f"top_native_kernel{k}": v for k, v in _renamed(NativeKernel, {"name": "", "kind": "_kind", "share": "_share"})
    }
    dtypes |= {c: pl.Float64() for c in columns if c not in dtypes}  # the collectors' metrics: numbers
    return table(rows, columns, dtypes)


def _renamed(cls: type, names: dict[str, str]) -> list[tuple[str, pl.DataType]]:
    """(new suffix, dtype) of the dataclass fields named in `names` (field -> suffix)."""
    dtypes = field_dtypes(cls)
    return [(suffix, dtypes[name]) for name, suffix in names.items()]


def types(a: Analysis) -> pl.DataFrame:
    """One row per layer type (top-level layers; time includes nested layers)."""
    dtypes = field_dtypes(TypeStat)
    return table([t.to_dict() for t in a.types], list(dtypes), dtypes)


class LayerKeys(TypedDict):
    """The columns that name a layer in the per-layer kernel tables (KEY_DTYPES)."""

    layer_index: int
    layer: str
    type: str


def _layer_keys(layer: LayerStat) -> LayerKeys:
    return {"layer_index": layer.index, "layer": layer.name, "type": layer.type}


KEY_DTYPES = {"layer_index": pl.Int64(), "layer": pl.String(), "type": pl.String()}
"""The columns that name a layer in the per-layer kernel tables: its index, full module name and type."""
NATIVE_LAYER_DTYPES = {
    "layer_samples": pl.Int64(),
    "layer_share_of_forward": pl.Float64(),
    "layer_wait_share": pl.Float64(),
    "layer_kernel_space_share": pl.Float64(),
}
NATIVE_KERNEL_COLUMNS = ("kernel", "kind", "library", "share", "samples", "cpi")


def _native_dtypes() -> dict[str, pl.DataType]:
    kernel = field_dtypes(NativeKernel)
    return {"kernel": kernel["name"], **{c: kernel[c] for c in NATIVE_KERNEL_COLUMNS[1:]}}


def kernels(a: Analysis) -> pl.DataFrame:
    """Native kernels per layer on every thread (perf samples, kernels pass): one row per layer and kernel, the
    layer's heaviest first; share = of the layer's sampled time over all threads; wait = its share in the OpenMP
    runtime (threads waiting or spinning), kernel space = its share in the kernel."""
    rows = []
    for layer in a.layers.layers:
        native = layer.native
        if native is None:
            continue
        own = {
            **_layer_keys(layer),
            "layer_samples": native.samples,
            "layer_share_of_forward": native.share_of_forward,
            "layer_wait_share": native.openmp_share,
            "layer_kernel_space_share": native.kernel_space_share,
        }
        for k in native.kernels:
            rows.append({**own, "kernel": k.name, **{c: getattr(k, c) for c in NATIVE_KERNEL_COLUMNS[1:]}})
    dtypes = KEY_DTYPES | NATIVE_LAYER_DTYPES | _native_dtypes()
    return table(rows, list(dtypes), dtypes)


def model_kernels(a: Analysis) -> pl.DataFrame:
    """Native kernels over the whole forward (perf samples, all threads), heaviest first; share = of forward's
    sampled time; layers = the layers it ran in, most first, with the share of its samples in each."""
    view = a.layers.native
    rows = [
        {
            "kernel": k.name,
            **{c: getattr(k, c) for c in NATIVE_KERNEL_COLUMNS[1:]},
            "layers": [name for name, _ in k.layers],
            "layer_shares": [share for _, share in k.layers],
        }
        for k in (view.kernels if view is not None else [])
    ]
    dtypes = _native_dtypes() | {"layers": pl.List(pl.String()), "layer_shares": pl.List(pl.Float64())}
    return table(rows, list(dtypes), dtypes)


def aten_kernels(a: Analysis) -> pl.DataFrame:
    """aten ops per layer (torch.profiler, trace pass): self time per iteration on the calling thread (not scaled),
    calls per iteration, share of the layer's aten time, and the oneDNN implementation where matched."""
    rows = [
        {
            **_layer_keys(layer),
            "op": k.name,
            "onednn_impl": k.label,
            "self_ms": k.self_ms,
            "calls": k.calls,
            "share": k.share,
        }
        for layer in a.layers.layers
        for k in layer.kernels
    ]
    kernel = field_dtypes(Kernel)
    dtypes = KEY_DTYPES | {"op": kernel["name"], "onednn_impl": kernel["label"]}
    dtypes |= {c: kernel[c] for c in ("self_ms", "calls", "share")}
    return table(rows, list(dtypes), dtypes)


ROOFLINE_COLUMNS = (
    "flops",
    "min_bytes",
    "intensity",
    "share",
    "gflops_s",
    "attainable_gflops",
    "pct_peak",
    "pct_roof",
    "bound",
    "measured_bytes",
    "measured_intensity",
    "bound_measured",
)


@dataclass(frozen=True)
class RooflineRow:
    """One row of `roofline`: a top-level layer (LayerStat's figures), or the whole forward (scope "forward",
    no index; the RooflineSummary's figures, its share 1 and its roof worked out here)."""

    scope: str
    name: str
    type: str
    index: int | None
    flops: float | None
    min_bytes: float | None
    intensity: float | None
    share: float | None
    gflops_s: float | None
    attainable_gflops: float | None
    pct_peak: float | None
    pct_roof: float | None
    bound: str | None
    measured_bytes: float | None
    measured_intensity: float | None
    bound_measured: str | None

    @classmethod
    def of_layer(cls, r: LayerStat) -> RooflineRow:
        return cls(
            "layer", r.name, r.type, r.index, r.flops, r.min_bytes, r.intensity, r.share, r.gflops_s,
            r.attainable_gflops, r.pct_peak, r.pct_roof, r.bound, r.measured_bytes, r.measured_intensity,
            r.bound_measured,
        )  # fmt: skip

    @classmethod
    def of_forward(cls, s: RooflineSummary, roof: Roof) -> RooflineRow:
        attainable = roof.attainable_gflops(s.intensity) if s.intensity is not None else None
        pct_roof = 100 * s.gflops_s / attainable if attainable is not None and s.gflops_s is not None else None
        share = 1.0 if s.gflops_s is not None else None
        return cls(
            "forward", "forward", "forward", None, s.flops, s.min_bytes, s.intensity, share, s.gflops_s,
            attainable, s.pct_peak, pct_roof, s.bound, s.measured_bytes, s.measured_intensity, s.bound_measured,
        )  # fmt: skip


def roofline(a: Analysis) -> pl.DataFrame:
    """Each top-level layer on the roofline, then the whole forward (scope "forward"): FLOPs, minimum bytes,
    intensity (FLOP/B), achieved GFLOP/s (scaled time, nested layers included), its % of the measured peak and
    of the layer's own roof, and its bound (intensity against the ridge point; `bound_measured` from the
    traffic the counters measured, where they could)."""
    rows = [RooflineRow.of_layer(r) for r in a.layers.top_level]
    s, roof = a.roofline, a.layers.roof.roof
    if s is not None and roof is not None:
        rows.append(RooflineRow.of_forward(s, roof))
    stat = field_dtypes(LayerStat)
    dtypes = {"scope": pl.String(), "index": stat["index"], "name": stat["name"], "type": stat["type"]}
    dtypes |= {c: stat[c] for c in ROOFLINE_COLUMNS}
    return table([asdict(r) for r in rows], list(dtypes), dtypes)


COST_COLUMNS = ("method", "ratio", "low", "high", "q1", "q3", "blocks", "forward_on_ms", "forward_off_ms")

PassCostRow = TypedDict(
    "PassCostRow",
    {
        "pass": str,
        "status": str,
        "collectors": list[str],
        "wall_s": float | None,
        "forward_p50_ms": float | None,
        "pass_level_ratio": float | None,
        "host_steal_share": float | None,
        "neighbours_share": float | None,
        "cost_method": NotRequired[str],
        "cost_ratio": NotRequired[float | None],
        "cost_low": NotRequired[float | None],
        "cost_high": NotRequired[float | None],
        "cost_q1": NotRequired[float | None],
        "cost_q3": NotRequired[float | None],
        "cost_blocks": NotRequired[int],
        "cost_forward_on_ms": NotRequired[float | None],
        "cost_forward_off_ms": NotRequired[float | None],
        "cost_resolved": NotRequired[bool],
        "cost_unresolved_why": NotRequired[str | None],
        "cost_text": NotRequired[str | None],
    },
)
"""One row of `pass_costs` (a TypedDict for its "pass" key): the cost_* keys where the pass has its own cost
(the COST_COLUMNS of its PassCostFigure; cost_ratio null where the cost did not resolve)."""


def _pass_cost_row(p: PassCost) -> PassCostRow:
    row: PassCostRow = {
        "pass": p.name,
        "status": p.status,
        "collectors": p.collectors,
        "wall_s": p.wall_s,
        "forward_p50_ms": p.forward_p50_ms,
        "pass_level_ratio": p.ratio,
        "host_steal_share": p.host_steal_share,
        "neighbours_share": p.neighbours.share if p.neighbours is not None else None,
    }
    cost = p.cost
    if cost is not None:
        row["cost_method"] = cost.method
        row["cost_ratio"] = cost.ratio if cost.resolved else None
        row["cost_low"], row["cost_high"] = cost.low, cost.high
        row["cost_q1"], row["cost_q3"] = cost.q1, cost.q3
        row["cost_blocks"] = cost.blocks
        row["cost_forward_on_ms"], row["cost_forward_off_ms"] = cost.forward_on_ms, cost.forward_off_ms
        row["cost_resolved"], row["cost_text"] = cost.resolved, p.cost_text()
        row["cost_unresolved_why"] = cost.unresolved_why or None
    return row


def pass_costs(a: Analysis) -> pl.DataFrame:
    """What each pass cost over a clean forward: its own figure (`cost_method` paired in the pass, or a
    pass-level estimate against the timing pass), its spread and whether it resolved (an unresolved cost has no
    `cost_ratio`; `cost_unresolved_why` says why: fewer blocks than paired_cost.MIN_BLOCKS, or quartiles too far
    apart; `cost_text` is the report's words: the too-few-blocks reason, else who took the CPUs); the pass-level
    ratio; the share of the run's CPUs other work took during the pass."""
    rows = [_pass_cost_row(p) for p in a.overheads.passes]
    dtypes: dict[str, pl.DataType] = {
        "pass": pl.String(),
        "status": pl.String(),
        "collectors": pl.List(pl.String()),
        "wall_s": pl.Float64(),
        "forward_p50_ms": pl.Float64(),
        "pass_level_ratio": pl.Float64(),
        "host_steal_share": pl.Float64(),
        "neighbours_share": pl.Float64(),
    }
    figure = field_dtypes(PassCostFigure)
    dtypes |= {f"cost_{c}": figure[c] for c in COST_COLUMNS}
    dtypes |= {"cost_resolved": pl.Boolean(), "cost_unresolved_why": pl.String(), "cost_text": pl.String()}
    return table(rows, list(dtypes), dtypes)


def findings(a: Analysis) -> pl.DataFrame:
    """The ranked findings: title, evidence, kind ("caveat" for a note on the data itself), weight (the share of
    forward or of the pipeline concerned: the ranking key), topic and the top-level layers they name."""
    dtypes = field_dtypes(Finding)
    return table([f.to_dict() for f in a.findings], list(dtypes), dtypes)


def advice(a: Analysis) -> pl.DataFrame | None:
    """advice.csv as a table (None when the run was not advised): one row per candidate change in display order,
    the advice ranked first."""
    if a.advice is None:
        return None
    dtypes = {**field_dtypes(AdviceRow), "rank": pl.Int64(), "ranked": pl.Boolean(), "stages_note": pl.String()}
    for prefix in ("forward_", "end_to_end_"):
        dtypes |= field_dtypes(Speedup, prefix) | {f"{prefix}resolved": pl.Boolean()}
    dtypes |= field_dtypes(OutputCheck, "output_")
    for n in range(1, ADVICE_LAYERS + 1):
        dtypes |= field_dtypes(LayerDelta, f"layer_{n}_")
    return table(advice_csv_rows(a.advice), list(ADVICE_COLUMNS), dtypes)


@dataclass(frozen=True)
class DetectionRow:
    """One row of `detections`: the boxes of one class NMS kept on one image (over a video's frames: `frames` of
    them); an image where it kept none has one row with no class and count 0."""

    image: str
    frames: int
    class_id: int | None
    class_name: str | None
    count: int


def _detection_rows(a: Analysis) -> list[DetectionRow]:
    doc = a.doc.detections
    if not doc:
        return []
    if doc.video is not None:
        v = doc.video
        name = str(v.video or "")
        rows = [DetectionRow(name, v.frames, c.id, c.name, c.boxes) for c in v.classes]
        return rows or [DetectionRow(name, v.frames, None, None, 0)]
    rows = []
    for image in doc.images or []:
        name = str(image.image or "")
        rows += [DetectionRow(name, 1, c.id, c.name, c.boxes) for c in image.classes]
        if not image.classes:
            rows.append(DetectionRow(name, 1, None, None, 0))
    return rows


def detections(a: Analysis) -> pl.DataFrame:
    """The boxes NMS kept in the measured iterations of the timing pass, per image and class (an image's first
    measured iteration; a video's boxes summed over its measured frames): image, frames, class_id, class (the
    checkpoint's name), count. No rows where the run did not record them (a run from before, a program's)."""
    dtypes = field_dtypes(DetectionRow)
    rows = [asdict(r) for r in _detection_rows(a)]
    for row in rows:
        row["class"] = row.pop("class_name")
    columns = ["class" if c == "class_name" else c for c in dtypes]
    return table(rows, columns, {("class" if c == "class_name" else c): t for c, t in dtypes.items()})


def memory(a: Analysis) -> pl.DataFrame:
    """Memory per layer, means per measured forward (hwprof.analysis.layers.memory): name, type, depth,
    alloc_bytes, freed_bytes, allocs, peak_bytes, growth_bytes (torch's CPU allocator: torch_memory) and faults
    (page faults: perf_events), both in the layers pass. No rows where no layer has an allocator figure
    (`why("memory")`)."""
    dtypes = field_dtypes(LayerMemory)
    rows = [asdict(r) for r in a.memory.layers if r.alloc_bytes is not None or r.faults is not None]
    return table(rows, list(dtypes), dtypes)


TABLES = {
    "stages": stages,
    "layers": layers,
    "types": types,
    "kernels": kernels,
    "model_kernels": model_kernels,
    "aten_kernels": aten_kernels,
    "roofline": roofline,
    "pass_costs": pass_costs,
    "findings": findings,
    "detections": detections,
    "memory": memory,
}
"""Every table a run always has (possibly with no rows), by name; advice is the one that may be absent."""
