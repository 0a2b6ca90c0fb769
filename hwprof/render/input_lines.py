"""The report header's input and output lines: the input shapes the forwards were given where more than one
occurred (each with its forwards per pass), the video the frames were decoded from (with the frames each pass
read, and the times it looped), and where the annotated frames were kept (`collect --annotate`); the first
screen's input shapes (the timing pass's, with their warm-up and measured forwards)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hwprof.render.measured_flops import gflops_text, measured_forwards

if TYPE_CHECKING:
    from hwprof.schema.run import RunDoc


def _read_text(run: RunDoc) -> str:
    """Frames decoded per pass, and the loops: "timing 23, kernels 41 (looped 1x)"."""
    parts = []
    for name, entry in run.passes.items():
        frames = entry.frames
        if frames is None or frames.read is None:
            continue
        looped = f" (looped {frames.rewinds}x)" if frames.rewinds else ""
        parts.append(f"{name} {frames.read:,}{looped}")
    return ", ".join(parts)


def run_shapes(run: RunDoc) -> dict[str, dict[str, int]]:
    """Each input shape of the run's forwards -> its forwards per pass (warm-up, measured and clean), shapes in the
    order first seen; empty for a run that recorded none (older runs)."""
    out: dict[str, dict[str, int]] = {}
    for name, entry in run.passes.items():
        for shape, calls in (entry.inputs.shapes if entry.inputs is not None else {}).items():
            out.setdefault(shape, {})[name] = calls.total
    return out


def warmup_text(run: RunDoc) -> str:
    """ "3 warm-up", or, where the passes warmed up until warm (hwprof.session.warmup), "1-2 warm-up (each pass until
    warm)": the warm-up iterations the passes ran, from their recorded forwards (the config's count in older runs)."""
    counts = {
        sum(calls.warmup for calls in entry.inputs.shapes.values())
        for entry in run.passes.values()
        if entry.inputs is not None and entry.inputs.shapes
    }
    extra = run.config.extra or {}
    if not extra.get("warmup_steady") or not counts:
        return f"{run.config.warmup} warm-up"
    low, high = min(counts), max(counts)
    return f"{low if low == high else f'{low}-{high}'} warm-up (each pass until warm)"


def shapes_text(shapes: dict[str, dict[str, int]]) -> str:
    """ "1x3x320x256 (timing 12, layers 15) · 1x3x192x320 (layers 9)"."""
    return " · ".join(
        f"{shape} ({', '.join(f'{name} {n}' for name, n in per_pass.items())})" for shape, per_pass in shapes.items()
    )


def pass_inputs_text(run: RunDoc, own_input: bool) -> str | None:
    """The first screen's input shapes: the timing pass's (each with its warm-up and measured forwards), and the
    shapes only other passes' forwards had; None where no pass recorded its inputs, or (not `own_input`: the
    pipeline, whose shape --imgsz and --batch give) where the forwards had one shape."""
    recorded = [(name, e.inputs) for name, e in run.passes.items() if e.inputs is not None and e.inputs.shapes]
    if not recorded or (not own_input and len(run_shapes(run)) < 2):
        return None
    name, inputs = next(((n, i) for n, i in recorded if n == "timing"), recorded[0])
    others = [shape for shape in run_shapes(run) if shape not in inputs.shapes]
    also = f"; other passes' forwards also {', '.join(others)}" if others else ""
    return f"{inputs.text()} in the {name} pass{also}"


def flops_shape_note(run: RunDoc, at: str) -> str:
    """Where the forwards had more than one input shape: the FLOPs figure is at `at` alone (the model's sample
    input), and whether a measured forward had it; '' otherwise."""
    others = [shape for shape in run_shapes(run) if shape != at]
    if not others:
        return ""
    from hwprof.schema.summaries_cpu import FlopsSummary

    measured = measured_forwards(run)
    unmeasured = ", a shape no measured forward had" if measured and at not in measured else ""
    summary = run.entry(FlopsSummary.NAME).summary
    by_shape = (summary.flops_by_shape if isinstance(summary, FlopsSummary) else None) or {}
    counted = [
        f"{gflops_text(float(flops) / 1e9)} GFLOPs at {s}"
        for s in others
        if isinstance(flops := by_shape.get(s), int | float)
    ]
    if len(counted) == len(others):
        layers = run.passes.get("layers")
        per_shape = layers is not None and layers.inputs is not None and layers.inputs.mixed
        where = ', every shape\'s in "layers by input shape"' if per_shape else ""
        return (
            f" (the forwards had other shapes too: {', '.join(counted)}; the layer table's FLOPs are at {at}"
            f"{unmeasured}{where})"
        )
    return f" (counted at this shape only{unmeasured}; the forwards also had {', '.join(others)})"


def input_lines(run: RunDoc) -> list[tuple[str, str]]:
    """("input", ...) for a video, ("output", ...) with --annotate; nothing for images without an output."""
    out: list[tuple[str, str]] = []
    shapes = run_shapes(run)
    if len(shapes) > 1:
        out.append(("inputs", shapes_text(shapes) + " (forwards per pass, warm-up included)"))
    video = run.video
    if video is not None:
        frames = f"{video.frames:,} frames" if video.frames is not None else "frame count not stated"
        fps = f" at {video.fps:g} fps" if video.fps else ""
        codec = f", {video.codec}" if video.codec else ""
        read = _read_text(run)
        looped = " (looped: read again from its first frame when it ended)" if "looped" in read else ""
        per_pass = f"; frames decoded per pass: {read}{looped}"
        out.append(
            (
                "input",
                f"video {Path(video.path or '?').name} ({video.width}x{video.height}, {frames}{fps}{codec}), "
                f"consecutive frames per batch{per_pass if read else ''}",
            )
        )
    annotated = run.annotated
    if annotated is not None:
        if annotated.error:
            out.append(("output", f"--annotate {annotated.path}: {annotated.error}"))
        else:
            what = "video" if annotated.kind == "video" else "images"
            out.append(
                (
                    "output",
                    f"annotated {what} {annotated.path}: {annotated.frames:,} frames of the {annotated.pass_name} "
                    "pass (warm-up included; the other passes' copies were removed)",
                )
            )
    return out
