"""What a pass leaves of its workload when it ends: the pipeline's input and output closed, and the pass's
result.json record filled with what the workload saw (detections, the runtime, a video's frames, the input shapes).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hwprof.core.input_shapes import InputTally
from hwprof.schema.codec import json_value
from hwprof.schema.frames import FramesDoc
from hwprof.schema.inputs import inputs_doc
from hwprof.schema.pass_files import PassResult


def close_pipeline(pipeline: Any) -> str | None:
    """The video released and the annotated output flushed, whatever ended the pass (a video writer that is not
    released leaves a file no player reads); the error that fails the pass when it could not be."""
    close = getattr(pipeline, "close", None)  # a program's pass holds the program's model: no input
    if close is None:
        return None
    try:
        close()
    except Exception as exc:
        print(f"closing the pipeline's video input or output failed: {exc}", file=sys.stderr)
        return f"{type(exc).__name__}: {exc}"
    return None


def frames_doc(pipeline: Any, relpath: Callable[[Path], str]) -> FramesDoc | None:
    """What the pass read of a video and wrote of the annotated output (None: images, no output)."""
    if getattr(pipeline, "video", None) is None and getattr(pipeline, "annotate_to", None) is None:
        return None
    doc = FramesDoc.of()
    if pipeline.video is not None:
        doc.update(read=pipeline.video.frames_read, rewinds=pipeline.video.rewinds)
    if pipeline.annotate_to is not None:
        written = pipeline.sink.written if pipeline.sink is not None else 0
        doc.update(written=written, output=relpath(pipeline.annotate_to))
    return doc


def pass_result(result: PassResult, pipeline: Any, relpath: Callable[[Path], str], tally: InputTally) -> PassResult:
    """`result` (the pass's status and collectors) with what its workload saw: detections and candidates per
    iteration, the boxes kept per image and class, the runtime, a video's frames, and the input shapes where a
    forward ended."""
    result.update(
        detections_per_iteration=json_value(pipeline.detections if pipeline else []),
        candidates_per_iteration=list(pipeline.candidates) if pipeline else [],
        runtime=pipeline.runtime.info if pipeline and pipeline.runtime else None,
    )
    kept = getattr(pipeline, "tally", None)  # a program's pass counts no boxes of its own
    detections = kept.doc(result.pass_name) if kept is not None else None
    if detections is not None:
        result.update(detections=detections)
    frames = frames_doc(pipeline, relpath)
    if frames is not None:
        result.update(frames=frames)
    inputs = inputs_doc(tally.calls, tally.measured, tally.clean)
    if inputs is not None:
        result.update(inputs=inputs)
    return result
