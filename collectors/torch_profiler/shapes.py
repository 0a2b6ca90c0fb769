"""The ops' input shapes from one warm-up forward, not from every measured one.

`record_shapes` makes torch.profiler copy every op's input sizes, dtypes and strides as the op runs: on
yolov7-tiny at 320 with 2 threads, in the real trace pass with py-spy off, it cost 1.071-1.121x against
1.053-1.076x without (3 alternating runs of scripts/bench_attributing_passes.py --skip pyspy --extra
'{"profiler_shapes": false}'), about 3%; the parts benchmark, which restarts the profiler in each "on"
iteration, overstates it (1.104x against 1.033x). A fixed-size input gives every op the same shapes in
every iteration, so the last warm-up iteration (warm: its kernels and primitives already chosen) is
profiled alone with shapes, and the measured iterations without. Each measured op takes the dims of the
op at the same place in the warm-up forward: the same layer (or stage outside layers), the same op name,
the same occurrence within it.
An op with no counterpart there gets none, counted as `unmatched`. extra.profiler_shapes_measured keeps
record_shapes on in the measured iterations instead (the method before).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol, TypeVar

from hwprof.collectors.torch_profiler.kineto import export_trace


class PlacedOp(Protocol):
    """What matching needs of an op (convert.OpRecord): where it ran, its Kineto event, its dims."""

    start: int
    iteration: int | None
    layer: str | None
    stage: str | None
    event: Any
    dims: list[Any]


Op = TypeVar("Op", bound=PlacedOp)

SHAPES_FILE = "torch_profiler.shapes.kineto.json"
METHOD = (
    "input dims from the last warm-up forward profiled alone with record_shapes, matched by layer (or stage), "
    "op name and occurrence: a fixed-size input gives every iteration the same shapes, and the measured "
    "iterations run without record_shapes, which added about 3% to the trace pass on a small model here"
)


def place_keys(ops: Iterable[Op]) -> Iterator[tuple[tuple[Any, str, str, int], Op]]:
    """(iteration, layer or stage, op name, occurrence) for each op, the occurrence counted in start order."""
    seen: Counter[tuple[Any, str, str]] = Counter()
    for op in sorted(ops, key=lambda o: o.start):
        place = (op.iteration, op.layer or f"stage:{op.stage}", op.event.name)
        yield (*place, seen[place]), op
        seen[place] += 1


def event_dims(event: Any) -> list[Any]:
    dims = event.args.get("Input Dims")
    return [d for d in dims if d] if dims else []  # the measured iterations record none (METHOD): most events


def attach_dims(ops: list[Op], warmup_ops: list[Op]) -> dict[str, int]:
    """Give each measured op the dims of its counterpart in the warm-up forward; how many matched."""
    by_place = {key[1:]: event_dims(op.event) for key, op in place_keys(warmup_ops)}
    matched = unmatched = 0
    for key, op in place_keys(ops):
        dims = by_place.get(key[1:])
        if dims is None:
            unmatched += 1
            continue
        op.dims = dims
        matched += 1
    return {"matched": matched, "unmatched": unmatched}


class WarmupShapes:
    """A profiler with record_shapes over one warm-up iteration, its trace written to the pass folder."""

    def __init__(self, out_dir: Path) -> None:
        self.path = out_dir / SHAPES_FILE
        self._prof: Any = None
        self.error = ""

    @property
    def running(self) -> bool:
        return self._prof is not None

    def begin(self, with_modules: bool = False) -> None:
        """`with_modules`: a TorchScript model's module hierarchies are recorded in this forward too."""
        from torch.profiler import ProfilerActivity, profile

        self._prof = profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_modules=with_modules)
        self._prof.start()

    def end(self) -> bool:
        """Stop and write the trace; False (with `error`, which the summary reports) if it could not be written."""
        prof, self._prof = self._prof, None
        if prof is None:
            return False
        try:
            prof.stop()
            self.path.unlink(missing_ok=True)
            export_trace(prof, self.path, "its trace")
        except (OSError, RuntimeError) as exc:
            self.error = f"the warm-up shapes profile failed: {exc}"
            return False
        return True

    def abandon(self) -> None:
        """Stop a profile that a stop signal cut inside its warm-up iteration."""
        prof, self._prof = self._prof, None
        if prof is not None:
            prof.stop()
