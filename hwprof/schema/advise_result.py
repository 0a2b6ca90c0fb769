"""What one advise worker is asked to measure (its spec: hwprof.advisor.runner writes it, the worker reads it)
and what it measured (hwprof.advisor.paired_worker writes it, hwprof.advisor.runner reads it back): per side
("baseline", "variant"), the forward and iteration ms by side iteration, the iterations' time stamps for the
trace, the batch and what preparing the side took; the variant's output check.

Not run directory files (the worker's spec and out file in the advise work folder), read as records (codec.py)
so the worker and the advice rows take typed fields, and a damaged field gives one line naming the file and the
field.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from hwprof.schema.bounds import Count, NonNegative
from hwprof.schema.codec import JsonObject, Record


@dataclass(kw_only=True)
class SideSetup(Record):
    """What preparing the side took before its first measured forward (hwprof.advisor.sides.Side.setup)."""

    prepare_s: NonNegative | None = None
    """Export, conversion, runtime session."""
    first_forward_s: NonNegative | None = None
    """The first forward (compile, graph capture) including its own forward time."""
    second_forward_s: NonNegative | None = None
    """A compiled or captured side's second forward: where the first call changed what the compiled code guards
    on (an attribute it set, a cache it filled), Dynamo compiles again there."""


@dataclass(kw_only=True)
class SideFigures(Record):
    """One side's measured figures (paired_worker.side_figures). Keys of the ms maps are side iterations:
    in ABBA order, block = iteration // 2."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("forward_ms", "iteration_ms")
    forward_ms: dict[str, float] = field(default_factory=dict)
    iteration_ms: dict[str, float] = field(default_factory=dict)
    stamps: dict[str, list[Any]] = field(default_factory=dict)
    """Iteration -> [start_ns, end_ns, forward start_ns, forward end_ns]: the trace's ABBA blocks."""
    batch: Count | None = None
    threads: Count | None = None
    setup: SideSetup = field(default_factory=SideSetup)
    runtime: JsonObject | None = None
    """The side's runtime info (its scalar keys)."""
    solo_forward_ms: dict[str, float] | None = None
    """The side's forward alone in the same process (paired mode only): the baseline's before the variant was
    built, the variant's in a block of its own after the ABBA blocks. Each side's paired p50 is checked
    against it (hwprof.analysis.advice.rows.side_drift)."""
    stage_ms: dict[str, dict[str, float]] | None = None
    """The iteration's other stages (load, preprocess, h2d, postprocess) -> ms by side iteration: where end to end
    and forward disagree, the stage that moved (hwprof.analysis.advice.table.StageDelta)."""
    minor_faults: dict[str, float] | None = None
    """Minor page faults of the process (all threads) in each measured iteration, by side iteration."""
    rss_bytes: dict[str, float] | None = None
    """The process's resident bytes at the end of each measured iteration, by side iteration (since issue 59)."""
    preloaded: dict[str, bool] | None = None
    """Each LD_PRELOAD library of the worker's process -> mapped in it (a side alone in its process)."""
    glibc_tunables: str | None = None
    """GLIBC_TUNABLES as the worker's process saw it (a side alone in its process)."""

    @property
    def images_per_batch(self) -> int:
        return max(1, int(self.batch if self.batch is not None else 1))


@dataclass(kw_only=True)
class AdviseResult(Record):
    """The worker's out file: its mode, both (or one) sides, the variant's output check, or its error."""

    mode: str | None = None
    """"paired" (both sides in one process, ABBA), "baseline" or "variant" (one side per process)."""
    output: JsonObject | None = None
    """hwprof.advisor.output_check's figures (hwprof.analysis.advice.table.OutputCheck as a dict)."""
    output_error: str | None = None
    sides: dict[str, SideFigures] = field(default_factory=dict)
    error: str | None = None
    """The worker failed: why (and nothing else is written)."""
    calls: Count | None = None
    """Mode "count" (a program's): its calls of its model once found, up to the spec's `calls`."""
    stopped: str | None = None
    """A paired worker that left the race after its first blocks: how far it ran and why (analysis.advice.race)."""


@dataclass(kw_only=True)
class AdviseSpec(Record):
    """The worker's spec: the candidate, both configurations (RunConfig.to_dict()), how to run the variant, the
    ABBA blocks and warm-up, its work folder, its mode and the out file it writes (an AdviseResult)."""

    key: str | None = None
    baseline: JsonObject = field(default_factory=dict)
    variant: JsonObject = field(default_factory=dict)
    compile_mode: str = ""
    """torch.compile the variant's module in this mode ("": not compiled)."""
    cuda_graph: bool = False
    """Replay the variant's forward as a CUDA graph."""
    blocks: Count = 0
    first_blocks: Count = 0
    """A paired worker's first blocks, after which it stops where it is out of the race (0: it runs `blocks`)."""
    race_bar: JsonObject | None = None
    """The best row so far: {"key", "low" (its spread's low end), "spread"} (analysis.advice.race.race_bar)."""
    warmup: Count = 0
    work_dir: str = ""
    run_dir: str = ""
    """The run advised: its saved init scales make the workers' model the collect's (hwprof.workload.init_scale)."""
    mode: str | None = None
    """"paired", "baseline" or "variant" (see AdviseResult.mode), or a program's "count"; absent: "paired"."""
    calls: Count = 0
    """Mode "count": stop the program once it made this many calls of its model after the one that chose it."""
    out: str = ""

    def for_mode(self, mode: str, out: str) -> AdviseSpec:
        """This spec for one worker: its mode and out file added (written after the other keys)."""
        spec = dataclasses.replace(self)
        spec.update(mode=mode, out=out)
        return spec
