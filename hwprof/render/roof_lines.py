"""The compute roof in words: the report's header line and roofline rows, and `hwprof doctor --peaks`.

One place says where the roof comes from (the probe's peak, or the run's own best layer rate where a layer
ran faster than it), the probe's spread and how the collect got it (cached quiet measurements, measured
now, or a busy host's figure for this run only), and the paper peak beside it, labelled as a paper figure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import RenderableType
from rich.text import Text

if TYPE_CHECKING:
    from hwprof.analysis.roofline import Roof
    from hwprof.hardware.machine import Peaks
    from hwprof.hardware.paper_peak import PaperPeak
    from hwprof.schema.host import PaperPeakDoc

SOURCES = {
    "cached": "cached: the highest quiet measurement of this host",
    "measured": "measured by this collect on a quiet host, cached",
    "busy": "measured by this collect on a busy host: this run's only, not cached",
}


def _layers(n: int) -> str:
    return f"{n} layer" if n == 1 else f"{n} layers"


def _spread(low_high: tuple[float, float] | list[float] | None) -> str:
    return f"samples {low_high[0]:.1f}..{low_high[1]:.1f}" if low_high else ""


def probe_detail(roof: Roof) -> str:
    """The probe's spread, how the collect got its figure, whether the host was busy."""
    parts = [_spread(roof.gflops_spread) + (" GFLOP/s" if roof.gflops_spread else "")]
    if roof.source:
        parts.append(SOURCES.get(roof.source, roof.source))
    if roof.quiet_measurements > 1:
        parts.append(f"highest of {roof.quiet_measurements} quiet measurements")
    if roof.busy_host:
        parts.append(f"busy host ({roof.busy_text()}): likely too low")
    return "; ".join(p for p in parts if p)


def paper_text(paper: PaperPeakDoc | None) -> str:
    if paper is None:
        return "not recorded (a run collected before issue 46)"
    if paper.gflops is None:
        return f"unknown: {paper.reason}"
    return (
        f"{paper.gflops:.1f} GFLOP/s (paper figure, not measured: {paper.cores} cores x {paper.ghz or 0:.2f} GHz x "
        f"{paper.flop_per_cycle} FLOP/cycle)"
    )


def paper_sources(paper: PaperPeakDoc | None) -> str:
    if paper is None or paper.gflops is None:
        return ""
    return f"paper peak: cores: {paper.cores_source}; clock: {paper.ghz_source}; FLOP/cycle: {paper.flop_source}"


def header_text(roof: Roof) -> str:
    """The report header's peaks line."""
    probe = f"{roof.probe_gflops:.1f} GFLOP/s FP32 measured by a {roof.compute_label} ({probe_detail(roof)})"
    if roof.raised:
        probe = f"{roof.peak_gflops:.1f} GFLOP/s FP32, this run's best ({roof.raised_by}), above the {probe}"
    paper = f"; paper peak {roof.paper.gflops:.1f}" if roof.paper is not None and roof.paper.gflops else ""
    return f"{probe}{paper}; {roof.peak_gbps:.2f} GB/s (triad), ridge {roof.ridge:.1f} FLOP/B"


def compute_rows(roof: Roof) -> list[list[str]]:
    """The roofline section's compute rows: the roof, the probe's peak and its spread, the paper peak."""
    probe = f"{roof.probe_gflops:.1f} GFLOP/s (measured: {roof.compute_label})"
    if roof.raised:
        rows = [
            ["compute roof", f"{roof.peak_gflops:.1f} GFLOP/s (this run's best layer: {roof.raised_by})"],
            ["measured peak", f"{probe}; {_layers(roof.above_measured)} ran faster"],
        ]
    else:
        rows = [["peak compute", probe]]
    if roof.best_unscaled is not None:
        rows.append(["", scaled_text(roof)])
    rows.append(["probe", probe_detail(roof)])
    rows.append(["paper peak", paper_text(roof.paper)])
    paper = roof.paper
    if paper is not None and paper.gflops and roof.peak_gflops > paper.gflops:
        rows.append(["", f"{'roof' if roof.raised else 'measured'} above the paper figure: {_above_paper(roof)}"])
    return rows


def scaled_text(roof: Roof) -> str:
    """Where a raised roof is mostly the scaling of the layer times to the clean forward."""
    return (
        f"{roof.raised_by} ran at {roof.best_unscaled or 0:.1f} GFLOP/s by its own time in its pass; its "
        f"{roof.peak_gflops:.1f} is that time scaled to the clean forward (the host's load changed between passes)"
    )


def _above_paper(roof: Roof) -> str:
    if roof.best_unscaled is not None:
        return "a scaled layer time, not a rate the cores reach"
    return "the cores run faster than the stated clock (boost)"


def peaks_renderable(peaks: Peaks, paper: PaperPeak | None = None) -> RenderableType:
    """`hwprof doctor --peaks`."""
    text = Text()
    source = "cached" if peaks.cached else f"measured now in {peaks.measure_s:.1f} s"
    text.append("machine peaks ", style="bold")
    text.append(f"({source}; {peaks.measured_at}; key {peaks.host_key})\n")
    text.append(f"  compute    {peaks.gflops:.1f} GFLOP/s FP32 with {peaks.threads} threads")
    text.append(f" ({_spread(peaks.gflops_spread)})\n" if peaks.gflops_spread else "\n")
    text.append(f"             {peaks.gflops_method}; samples {peaks.gflops_samples}\n", style="dim")
    if len(peaks.quiet_gflops) > 1:
        quiet = peaks.quiet_gflops
        text.append(f"             highest of {len(quiet)} quiet measurements ({min(quiet):.1f}..{max(quiet):.1f})\n")
    text.append(f"  bandwidth  {peaks.gbps:.2f} GB/s\n")
    text.append(f"             {peaks.gbps_method}; samples {peaks.gbps_samples}\n", style="dim")
    text.append(f"  ridge      {peaks.ridge:.1f} FLOP/B\n")
    if paper is not None:
        text.append(f"  paper      {paper.text()}\n")
        if paper.gflops is not None:
            sources = f"cores: {paper.cores_source}; clock: {paper.ghz_source}; FLOP/cycle: {paper.flop_source}"
            text.append(f"             {sources}\n", style="dim")
    if peaks.load_avg_1m is not None:
        text.append(f"  load       {peaks.load_avg_1m:.2f} (1-min) on {peaks.logical_cpus} CPUs\n")
    if peaks.interference is not None:
        text.append(f"  others     {peaks.interference:.1%} of the host's CPU time while measuring\n")
    if peaks.busy_host:
        text.append(
            "  busy host: the peaks are likely too low; not cached: a collect uses them for its own run only, "
            "and the next one on a quiet host measures again\n",
            style="yellow",
        )
    elif not peaks.cached:
        text.append("  quiet host: cached (the cache keeps the highest quiet measurement)\n")
    text.rstrip()
    return text
