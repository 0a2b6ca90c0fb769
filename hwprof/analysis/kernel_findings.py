"""Findings drawn from the native kernels per layer (perf sampling in the kernels pass).

Each rule reads only what was sampled: shares of a layer's sampled time over all threads by
kernel name and kind, and CPI per kernel where the PMU counted cycles and instructions. Weights
are shares of forward, as for the other findings, so they rank together.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from hwprof.analysis.finding import CAVEAT, Finding, pct
from hwprof.analysis.layers.memory import ALLOC, FAULTS
from hwprof.core.kernel_causes import CAUSE_FAULT, CAUSE_INTERRUPT, CAUSE_IPI, CAUSE_SYSCALL, TOPICS, NativeCause
from hwprof.core.kernels import RANKED_LAYERS
from hwprof.core.native_view import NativeLayer, NativeView

if TYPE_CHECKING:
    from hwprof.analysis.layers.stats import LayerReport, LayerStat

IM2COL = re.compile(r"unfolded2d|slow_conv|im2col")
REFERENCE_CONV = re.compile(r"unfolded2d|slow_conv|im2col|mkl_blas_.*gemm")
"""aten's reference convolution (_slow_conv2d_forward): im2col (unfolded2d_copy), then an MKL GEMM."""
REFERENCE_MIN = 0.10
WAIT_LAYER = 0.45
WAIT_FORWARD = 0.25
MIN_LAYER_SHARE = 0.02
PAGE_FAULT_MIN = 0.05
KERNEL_LAYER = 0.15
"""A layer's share of its samples in the kernel worth a finding. A compute layer spends 1-3% there (timer
ticks, the odd syscall), so 15% is five times that, and above a layer's binomial error (about 7 points
at the 50 samples the kernels pass plans per layer at 1% of forward)."""
KERNEL_LAYER_SAMPLES = 10
"""Kernel samples a layer needs for its cause split to be read."""
KERNEL_LAYERS_SHOWN = 4
"""Layers given a kernel-share finding each; the findings are ranked with the rest and cut at ten."""
WHY = {
    CAUSE_FAULT: "activations get fresh memory every forward: the allocator returns freed blocks to the OS "
    "(munmap/madvise) and the next forward faults them in again, each new page charged to the memory cgroup "
    "and zeroed; an allocator that keeps freed memory (glibc malloc tunables, jemalloc/tcmalloc) avoids it",
    CAUSE_SYSCALL: "threads in syscalls: futex = threads sleeping and waking (the thread pool), "
    "munmap/madvise/mmap = the allocator returning or taking memory",
    CAUSE_IPI: "inter-processor interrupts, mostly TLB shootdowns: memory unmapped while other threads of "
    "the process run on other CPUs",
    CAUSE_INTERRUPT: "timer and device interrupts taken on the layer's threads",
}
OTHER_WHY = "kernel work with no fault, syscall or IPI entry in its callchain"
FAULTS_FIX = "an allocator that keeps freed memory avoids most (hwprof advise measures it)"
"""The page-fault finding's fix, in its first line: advise's malloc-keep, jemalloc and tcmalloc candidates."""
CPI_RATIO = 1.5
CPI_MIN_SHARE = 0.03


def _label(layer: LayerStat) -> str:
    return f"{layer.index} ({layer.type})"


def _names(layers: list[LayerStat]) -> str:
    shown = ", ".join(_label(r) for r in layers[:6])
    return shown + (f" and {len(layers) - 6} more" if len(layers) > 6 else "")


def _share_matching(native: NativeLayer, pattern: re.Pattern[str]) -> float:
    return sum(k.share for k in native.kernels if pattern.search(k.name))


def _with_native(report: LayerReport) -> list[tuple[LayerStat, NativeLayer]]:
    return [(r, r.native) for r in report.top_level if r.native is not None and (r.share or 0.0) >= MIN_LAYER_SHARE]


def reference_convolution(report: LayerReport) -> list[Finding]:

    hits = [(r, n, _share_matching(n, REFERENCE_CONV)) for r, n in _with_native(report) if _share_matching(n, IM2COL)]
    hits = [h for h in hits if h[2] >= REFERENCE_MIN]
    if not hits:
        return []
    hits.sort(key=lambda h: -(h[0].share or 0.0) * h[2])
    return [
        Finding(
            f"{_names([r for r, _, _ in hits])} run aten's reference convolution (im2col + MKL GEMM), not oneDNN",
            "; ".join(f"{r.index}: {100 * s:.0f}% of its samples" for r, _, s in hits[:5])
            + " in unfolded2d_copy / mkl_blas_*sgemm (perf, all threads): check the conv's dtype, groups, "
            "dilation and memory format (channels_last), or torch.backends.mkldnn",
            "kernels",
            sum((r.share or 0.0) * s for r, _, s in hits),
            topic="reference-conv",
        )
    ]


def waiting_threads(report: LayerReport) -> list[Finding]:

    view = report.native
    if view is None:
        return []
    out = []
    forward = view.forward.openmp_share
    if forward >= WAIT_FORWARD:
        out.append(
            Finding(
                f"torch's threads spend {100 * forward:.0f}% of forward's sampled time in the OpenMP runtime",
                "waiting at barriers or spinning for work (perf, all threads, kernels pass): parallel regions too "
                "small for the thread count, or serial work between them; try fewer --threads for this model size",
                "threads",
                forward * 0.5,
                topic="openmp-wait",
            )
        )
    layers = [(r, n) for r, n in _with_native(report) if n.openmp_share >= WAIT_LAYER and n.threads > 1]
    if layers:
        layers.sort(key=lambda rn: -(rn[0].share or 0.0) * rn[1].openmp_share)
        out.append(
            Finding(
                f"the threads mostly wait in {_names([r for r, _ in layers])}",
                "; ".join(f"{r.index}: {100 * n.openmp_share:.0f}% OpenMP runtime" for r, n in layers[:5])
                + " of the layer's samples over all threads: lost parallelism",
                "threads",
                sum((r.share or 0.0) * n.openmp_share for r, n in layers),
                topic="openmp-wait",
            )
        )
    return out


def _parts(cause: NativeCause, n: int = 2) -> str:
    """ "memcg charge 45%, page zeroing 30%": the cause's heaviest parts, as shares of the cause."""
    return ", ".join(f"{part} {pct(share / cause.share)}" for part, share in cause.parts[:n] if cause.share)


def _how(view: NativeView, native: NativeLayer) -> str:
    if native.by_leaf <= 0.0:
        return "by the kernel entry of each sample's callchain"
    if not view.callchains:
        return "guessed from the leaf symbols: this perf.data has no callchains (perf record without -g)"
    return f"by callchain, {pct(native.by_leaf)} of the layer's samples by leaf symbol (no callchain)"


def page_zeroing(report: LayerReport) -> list[Finding]:
    """Page faults' share of forward, by the cause each kernel sample's callchain shows (every kernel
    function a fault runs: the memcg charge, zeroing, page allocation, their locks)."""
    view = report.native
    if view is None:
        return []
    share = view.forward.cause_share(CAUSE_FAULT)
    if share < PAGE_FAULT_MIN:
        return []
    cause = next(c for c in view.forward.causes if c.cause == CAUSE_FAULT)
    layers = [(r, n, n.cause_share(CAUSE_FAULT)) for r, n in _with_native(report)]
    layers = sorted((h for h in layers if h[2] >= PAGE_FAULT_MIN), key=lambda h: -(h[0].share or 0.0) * h[2])
    where = "; ".join(f"{r.index}: {100 * s:.0f}%" for r, _, s in layers[:5])
    return [
        Finding(
            f"page faults take {pct(share)} of forward ({_parts(cause, 3)}): {FAULTS_FIX}",
            (f"most in {where} of the layer's samples; " if where else "")
            + _allocated([r for r, _, _ in layers[:5]])
            + f"{WHY[CAUSE_FAULT]} (perf, all threads, causes {_how(view, view.forward)})",
            "kernels",
            share,
            topic=TOPICS[CAUSE_FAULT],
            layers=tuple(r.index for r, _, _ in layers[:5]),
        )
    ]


def _allocated(rows: list[LayerStat]) -> str:
    """What the faulting layers allocate and fault per forward (the memory columns), where measured: "they
    allocate 7: 5.2 MB (830 faults), 9: 3.1 MB; ", or ""."""
    parts = []
    for r in rows:
        alloc, faults = r.metrics.get(ALLOC), r.metrics.get(FAULTS)
        if alloc is None and faults is None:
            continue
        text = f"{alloc / 1e6:.1f} MB" if alloc is not None else ""
        counted = f"{faults:.0f} faults" if faults is not None else ""
        parts.append(f"{r.index}: " + (f"{text} ({counted})" if text and counted else text or counted))
    return f"per forward they allocate (torch's allocator) and fault {', '.join(parts)}; " if parts else ""


def kernel_share(report: LayerReport, explained: frozenset[str] = frozenset()) -> list[Finding]:
    """One finding per cause for the layers whose threads spend a large share of their samples in the kernel, each
    layer under the cause that takes most of its kernel time: the cause's why said once, for all its layers (it
    was a finding per layer, the same paragraph each time), and not at all for a cause in `explained` (another
    finding says it: page_zeroing's for page faults)."""
    view = report.native
    if view is None:
        return []
    hits = [
        (r, n)
        for r, n in _with_native(report)
        if n.kernel_space_share >= KERNEL_LAYER
        and n.causes
        and n.kernel_space_share * n.samples >= KERNEL_LAYER_SAMPLES
    ]
    hits.sort(key=lambda rn: -(rn[0].share or 0.0) * rn[1].kernel_space_share)
    by_cause: dict[str, list[tuple[LayerStat, NativeLayer]]] = {}
    for r, n in hits[:KERNEL_LAYERS_SHOWN]:
        by_cause.setdefault(n.causes[0].cause, []).append((r, n))
    return [_kernel_finding(view, cause, group, cause in explained) for cause, group in by_cause.items()]


def _kernel_finding(
    view: NativeView, cause: str, group: list[tuple[LayerStat, NativeLayer]], explained: bool
) -> Finding:
    """The finding of the layers whose kernel time is mostly `cause` (the heaviest first)."""
    r, n = group[0]
    top = n.causes[0]
    kernel = n.kernel_space_share
    why = "why and how it was counted: the page-fault finding" if explained else WHY.get(cause, OTHER_WHY)
    splits = "; ".join(
        f"{row.index}: {pct(nat.kernel_space_share)} in the kernel, "
        + ", ".join(f"{c.cause} {pct(c.share / nat.kernel_space_share)}" for c in nat.causes)
        for row, nat in group
    )
    if len(group) == 1:
        title = f"layer {_label(r)}: {pct(kernel)} of its samples in the kernel, {pct(top.share / kernel)} of them"
    else:
        shares = sorted(nat.kernel_space_share for _, nat in group)
        title = f"layers {_names([row for row, _ in group])}: {pct(shares[0])}-{pct(shares[-1])} of their samples in"
        title += " the kernel, mostly"
    return Finding(
        f"{title} {top.cause} ({_parts(top)})",
        f"{why}; the kernel's time: {splits}" + ("" if explained else f" (perf, all threads, causes {_how(view, n)})"),
        "kernels",
        sum((row.share or 0.0) * nat.kernel_space_share for row, nat in group),
        topic=TOPICS[cause],
        layers=tuple(row.index for row, _ in group),
    )


def high_cpi_kernels(report: LayerReport) -> list[Finding]:

    view = report.native
    if view is None or view.forward.cpi is None:
        return []
    base = view.forward.cpi
    hot = [k for k in view.kernels if k.cpi is not None and k.share >= CPI_MIN_SHARE and k.cpi >= CPI_RATIO * base]
    label = {r.name: str(r.index) for r in report.layers}
    return [
        Finding(
            f"high-CPI kernel {k.name}: CPI {k.cpi:.2f} vs {base:.2f} over forward",
            f"{100 * k.share:.0f}% of forward's samples, in layers "
            + ", ".join(f"{label.get(n, n)} ({100 * s:.0f}%)" for n, s in k.layers[:4])
            + " (perf: cycles-sampled, group-read instructions)",
            "counters",
            k.share,
        )
        for k in hot[:3]
    ]


def thin_layers(report: LayerReport) -> list[Finding]:

    view = report.native
    if view is None:
        return []
    ranked = sorted(report.top_level, key=lambda r: -(r.share or 0.0))[:RANKED_LAYERS]  # what the kernels pass sized
    few = [r for r in ranked if r.native is not None and r.native.too_few]
    if not few:
        return []
    return [
        Finding(
            f"{_names(few)} got fewer than {view.min_samples} perf samples: their kernel shares are rough",
            "raise --iters or --perf-rate for the kernels pass",
            CAVEAT,
            0.0,
        )
    ]


def kernel_findings(report: LayerReport) -> list[Finding]:
    faults = page_zeroing(report)
    explained = frozenset({CAUSE_FAULT}) if faults else frozenset()
    return (
        reference_convolution(report)
        + waiting_threads(report)
        + faults
        + kernel_share(report, explained)
        + high_cpi_kernels(report)
    )
