"""`collect --annotate OUT`: after the passes, one pass's annotated output is moved to OUT and the others' copies
are removed.

Every pass writes the annotated frames into its own folder, so that each pass runs (and its collectors see) the
same annotate and encode stages; one copy is what the user asked for. The copy kept is the first pass's that
ended ok and wrote frames (the clean timing pass where it ran): its frames are its warm-up and measured
iterations' (a paired pass's clean iterations too), in the order they ran.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

from hwprof.core.uservalue import shown
from hwprof.schema.frames import AnnotatedDoc
from hwprof.schema.run import RunDoc


def _chosen(run: RunDoc) -> tuple[str, str, int] | None:
    """(pass, its output relative to the run directory, frames written) of the copy to keep, or None."""
    written = [
        (name, entry.frames.output, entry.frames.written or 0, entry.status == "ok")
        for name, entry in run.passes.items()
        if entry.frames is not None and entry.frames.output and entry.frames.written
    ]
    best = next((w for w in written if w[3]), None) or next(iter(written), None)
    return None if best is None else best[:3]


def keep_annotated(run_dir: Path, run: RunDoc, target: Path) -> AnnotatedDoc:
    """Move the chosen pass's output to `target` and remove every other pass's copy; what was kept, or why
    nothing was."""
    chosen = _chosen(run)
    outputs = [run_dir / entry.frames.output for entry in run.passes.values() if entry.frames and entry.frames.output]
    if chosen is None:
        _remove(outputs)
        return AnnotatedDoc.of(path=str(target), error="no pass wrote an annotated frame")
    name, output, frames = chosen
    source = run_dir / output
    kind = "images" if source.is_dir() else "video"
    try:
        _move(source, target)
    except OSError as exc:
        return AnnotatedDoc.of(
            path=str(target),
            pass_name=name,
            frames=frames,
            kind=kind,
            error=f"the annotated {kind} could not be moved to {shown(target)} ({exc}); it is kept in {output}",
        )
    _remove([p for p in outputs if p != source])
    return AnnotatedDoc.of(path=str(target), pass_name=name, frames=frames, kind=kind)


def _move(source: Path, target: Path) -> None:
    """A video file onto `target` (replacing it); a folder's images into the folder `target`."""
    if not source.is_dir():
        shutil.move(str(source), str(target))
        return
    target.mkdir(exist_ok=True)
    for item in sorted(source.iterdir()):
        shutil.move(str(item), str(target / item.name))
    source.rmdir()


def _remove(paths: list[Path]) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
