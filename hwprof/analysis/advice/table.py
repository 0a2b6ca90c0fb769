"""The advice table: candidate changes run as variants of a run's pipeline and measured against it.

`hwprof advise` (hwprof/advisor/) runs each candidate and writes advice.json in the run directory;
this module is the pure side: the records that file holds and which rows may be ranked as advice (a row's
speed-up figures and their methods: hwprof.analysis.advice.speedup). A process of a pass-level row that was
disturbed makes the row "not resolved" (AdviceRow.disturbed), never ranked.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from hwprof.analysis.advice.output import OutputCheck
from hwprof.analysis.advice.speedup import METHOD_TEXT, Speedup
from hwprof.analysis.advice.stages import StageDelta, StagesMoved, stages_moved
from hwprof.perf.neighbours import NeighbourLoad
from hwprof.rundir.names import ADVICE_JSON
from hwprof.rundir.reader import advice_path, read_json_if_present
from hwprof.schema.advice_file import ADVICE_SCHEMA, AdviceFile, AdviceRowDoc

T = TypeVar("T")
ADVICE_FILE = ADVICE_JSON
MEASURED = "measured"
CHANGED_OUTPUT = "changed output"
NOT_RUN = "not run"
FAILED = "failed"


@dataclass
class LayerDelta:
    """One layer's time in the baseline's and the variant's layers pass (ms per forward, p50)."""

    index: int
    type: str
    before_ms: float
    after_ms: float

    @property
    def delta_ms(self) -> float:
        return self.after_ms - self.before_ms


def top_layer_deltas(
    before: dict[int, tuple[str, float]], after: dict[int, float], n: int = 3, keep: tuple[int, ...] = ()
) -> list[LayerDelta]:
    """n layers: the first of those in `keep` (the layers the candidate's finding names, in its order: at most
    n - 1, a finding can name many), then the layers whose time moved most (either way), largest |delta| first."""
    rows = [LayerDelta(i, t, ms, after[i]) for i, (t, ms) in before.items() if i in after]
    named = [r for i in keep for r in rows if r.index == i][: max(n - 1, 0)]
    moved = [r for r in sorted(rows, key=lambda r: -abs(r.delta_ms)) if r.index not in keep]
    return named + moved[: n - len(named)]


@dataclass
class AdviceRow:
    key: str
    """A short id of the change: channels_last, compile, threads-1, onnxruntime, omp-passive, ..."""
    change: str
    """What changes, in words."""
    how: str
    """The exact hwprof collect options that give it, or the code where no option does."""
    finding: str
    """The title of the finding that suggests it."""
    status: str = MEASURED
    reason: str = ""
    """Why not run / why failed / why its output counts as changed."""
    forward: Speedup | None = None
    end_to_end: Speedup | None = None
    per_image: bool = False
    """The variant changes the batch: times are per image."""
    setup_s: float | None = None
    """Compile, export or conversion time of the variant (once per process)."""
    setup_what: str = ""
    output: OutputCheck | None = None
    layers: list[LayerDelta] = field(default_factory=list)
    layers_note: str = ""
    """Why no per-layer times (e.g. Inductor fuses across layers)."""
    pairing_note: str = ""
    """Why a pairable change was measured as two processes (its paired figure was disturbed)."""
    variant_run: str = ""
    """The variant's layers run directory, relative to the advised run's."""
    stages: list[StageDelta] = field(default_factory=list)
    """The iteration's stages other than the forward, p50 before and after (ms, per image where per_image)."""
    neighbours: dict[str, NeighbourLoad] = field(default_factory=dict)
    """Other work on the run's CPUs during each worker process ("paired", or "baseline", "variant",
    "baseline-after")."""
    disturbed: str = ""
    """Why the figure is not resolved though its spread is: a process of a pass-level estimate was disturbed
    ("" when none was). Such a row is never advice."""
    minor_faults: list[float] | None = None
    """[baseline, variant]: the process's minor page faults per measured iteration (medians): what an allocator
    change does to the kernel's share."""
    combination: str = ""
    """A combination of levers (analysis/advice/combos.py): why it ran, what its parts did ("" for a single lever)."""
    rss_bytes: list[float] | None = None
    """[baseline, variant]: the process's resident bytes at a measured iteration's end (medians): the memory an
    allocator keeps for its speed."""
    race: str = ""
    """How far its paired blocks ran where advise's race cut them after its first ones or gave it more to settle the
    first rows' order, and why (analysis.advice.race); "" where it ran the plan's blocks."""

    @property
    def stages_moved(self) -> StagesMoved | None:
        """Why end to end and forward disagree (another stage moved), or None where they agree."""
        f, e = self.forward, self.end_to_end
        fwd = (f.before_ms, f.after_ms) if f and f.before_ms is not None and f.after_ms is not None else None
        it = (e.before_ms, e.after_ms) if e and e.before_ms is not None and e.after_ms is not None else None
        return stages_moved(fwd, it, self.stages)

    @property
    def resolved(self) -> bool:
        """The forward's figure is resolved: its spread excludes 1.00 and no process of it was disturbed. The one
        source of advice.json's `resolved` (the row's and each speed-up's) and of the table's NOT RESOLVED."""
        return self.forward is not None and self.forward.resolved and not self.disturbed

    def speedup_dict(self, s: Speedup) -> dict[str, Any]:
        """A speed-up of this row as advice.json and advice.csv write it: not resolved where a process of the row
        was disturbed, whatever its spread."""
        return {**s.to_dict(), "resolved": s.resolved and not self.disturbed}

    @property
    def ranked(self) -> bool:
        """Advice: measured, output within tolerance, and measured faster: by the blocks' ratio, resolved by its
        spread, and by the p50s too (on a host whose load swings, the median of the blocks' ratios and the ratio
        of the two sides' p50s can disagree; such a row is not advice); never a disturbed pass-level figure."""
        return (
            self.status == MEASURED
            and not self.disturbed
            and self.forward is not None
            and self.forward.ratio > 1.0
            and self.resolved
            and not (self.forward.after_ms or 0.0) > (self.forward.before_ms or float("inf"))
            and (self.output is None or self.output.within_tolerance)
        )

    @property
    def breakeven_inferences(self) -> float | None:
        """Inferences after which the setup time is paid back by the forward's saving (None: never pays)."""
        f = self.forward
        if self.setup_s is None or f is None or f.before_ms is None or f.after_ms is None:
            return None
        saved_ms = f.before_ms - f.after_ms
        return self.setup_s * 1e3 / saved_ms if saved_ms > 0 else None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["forward"] = self.speedup_dict(self.forward) if self.forward else None
        out["end_to_end"] = self.speedup_dict(self.end_to_end) if self.end_to_end else None
        out["output"] = self.output.to_dict() if self.output else None
        # the guards' fields only where measured: a recorded advice.json (no worker ran) reads back unchanged
        for name in ("stages", "neighbours", "disturbed"):
            if not out[name]:
                del out[name]
        if self.neighbours:
            out["neighbours"] = {k: v.to_dict() for k, v in self.neighbours.items()}
        if (moved := self.stages_moved) is not None:
            out["stages_note"] = moved.text()
        out["resolved"] = self.resolved
        out["ranked"] = self.ranked
        out["breakeven_inferences"] = self.breakeven_inferences
        if self.minor_faults is None:  # counted by advise workers since issue 38; absent from older files
            del out["minor_faults"]
        if not self.combination:  # combinations since issue 41
            del out["combination"]
        if self.rss_bytes is None:  # read by advise workers since issue 59
            del out["rss_bytes"]
        if not self.race:  # since issue 66
            del out["race"]
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AdviceRow:
        return cls.from_doc(AdviceRowDoc.from_json(d, ADVICE_FILE))

    @classmethod
    def from_doc(cls, doc: AdviceRowDoc) -> AdviceRow:
        """From advice.json's record of it (a field it does not hold: the row's default)."""
        return cls(
            doc.key,
            doc.change,
            doc.how,
            doc.finding,
            _or(doc.status, MEASURED),
            _or(doc.reason, ""),
            Speedup.from_doc(doc.forward) if doc.forward else None,
            Speedup.from_doc(doc.end_to_end) if doc.end_to_end else None,
            _or(doc.per_image, False),
            doc.setup_s,
            _or(doc.setup_what, ""),
            OutputCheck.from_doc(doc.output) if doc.output else None,
            [LayerDelta(x.index, x.type, x.before_ms, x.after_ms) for x in doc.layers],
            _or(doc.layers_note, ""),
            _or(doc.pairing_note, ""),
            _or(doc.variant_run, ""),
            [StageDelta(x.name, x.before_ms, x.after_ms) for x in doc.stages],
            {k: NeighbourLoad.from_dict(v.to_json()) for k, v in (doc.neighbours or {}).items()},
            _or(doc.disturbed, ""),
            list(doc.minor_faults) if doc.minor_faults is not None else None,
            _or(doc.combination, ""),
            list(doc.rss_bytes) if doc.rss_bytes is not None else None,
            _or(doc.race, ""),
        )


@dataclass
class AdviceBlock:
    """One side's iteration inside an ABBA block, for the trace (CLOCK_MONOTONIC ns)."""

    key: str
    side: str
    """"baseline" or "variant"."""
    block: int
    iteration: int
    start_ns: int
    end_ns: int
    forward_start_ns: int
    forward_end_ns: int


@dataclass
class Advice:
    """advice.json: what was advised, for which configuration, and every candidate's row."""

    baseline: str
    """The advised run's configuration as collect options."""
    device: str
    rows: list[AdviceRow]
    blocks: list[AdviceBlock] = field(default_factory=list)
    started_ns: int = 0
    ended_ns: int = 0
    wall_s: float = 0.0
    source: str = "measured on this host"
    notes: list[str] = field(default_factory=list)

    def ordered(self) -> list[AdviceRow]:
        """Ranked advice first (largest forward speed-up first), then measured rows that are not advice
        (slower, unresolved, changed output), then failed and not-run rows."""

        def key(r: AdviceRow) -> tuple[int, float]:
            group = 0 if r.ranked else 1 if r.status in (MEASURED, CHANGED_OUTPUT) else 2 if r.status == FAILED else 3
            return group, -(r.forward.ratio if r.forward else 0.0)

        return sorted(self.rows, key=key)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": ADVICE_SCHEMA,
            "baseline": self.baseline,
            "device": self.device,
            "source": self.source,
            "started_ns": self.started_ns,
            "ended_ns": self.ended_ns,
            "wall_s": self.wall_s,
            "notes": self.notes,
            "methods": METHOD_TEXT,
            "rows": [r.to_dict() for r in self.ordered()],
            "blocks": [asdict(b) for b in self.blocks],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Advice:
        """advice.json's value, read through the schema's AdviceFile (ValueError for another schema version,
        RunDirError naming the field where it is damaged)."""
        doc = AdviceFile.read(d, ADVICE_FILE)
        blocks = [
            AdviceBlock(b.key, b.side, b.block, b.iteration, b.start_ns, b.end_ns, b.forward_start_ns, b.forward_end_ns)
            for b in doc.blocks
        ]
        return cls(
            doc.baseline,
            _or(doc.device, "cpu"),
            [AdviceRow.from_doc(r) for r in doc.rows],
            blocks,
            _or(doc.started_ns, 0),
            _or(doc.ended_ns, 0),
            _or(doc.wall_s, 0.0),
            _or(doc.source, ""),
            list(doc.notes or []),
        )


def _or(value: T | None, default: T) -> T:
    """A field of advice.json, or the default its reader takes where the file does not hold it."""
    return default if value is None else value


def contenders(rows: list[AdviceRow], n: int) -> set[str]:
    """The keys of the `n` rows a reader would act on first: measured (output within tolerance), faster by the
    median of their blocks (ratio above 1, resolved or not), fastest first; a ranked row before an unresolved one.
    A row measured slower, one that changed the output, failed or did not run is no contender."""
    able = [r for r in rows if r.status == MEASURED and r.forward is not None and r.forward.ratio > 1.0]
    able = [r for r in able if r.output is None or r.output.within_tolerance]
    best = sorted(able, key=lambda r: (not r.ranked, -(r.forward.ratio if r.forward else 0.0)))
    return {r.key for r in best[:n]}


def load_advice(run_dir: Path) -> tuple[Advice | None, str]:
    """The run's advice.json: (advice, "") or (None, why it could not be read); (None, "") when absent."""
    path = advice_path(run_dir)
    try:
        doc = read_json_if_present(path)
        if doc is None:
            return None, ""
        return Advice.from_dict(doc), ""
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return None, f"{path} could not be read ({type(exc).__name__}: {exc}); `hwprof advise {run_dir}` writes it anew"
