"""A candidate change for `hwprof advise`: what it sets of the run's configuration (Variant), how a user makes it,
the finding topics it answers (Candidate), and what the candidates of a run depend on (RunFacts). The lists of
candidates are hwprof.analysis.advice.candidates (CPU) and hwprof.analysis.gpu.candidates."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from hwprof.analysis.paired_cost import PAIRED, PASS_LEVEL


@dataclass(frozen=True)
class Variant:
    """The RunConfig fields a variant sets (None: as in the advised run), applied with dataclasses.replace."""

    runtime: str | None = None
    precision: str | None = None
    channels_last: bool | None = None
    threads: int | None = None
    batch: int | None = None

    def overrides(self) -> dict[str, str | bool | int]:
        """The fields set, in their declared order: RunConfig's field name -> its value in the variant."""
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}

    def to_dict(self) -> dict[str, Any]:
        return dict(self.overrides())

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Variant:
        return cls(**d)


@dataclass
class Candidate:
    key: str
    change: str
    how: str
    """collect options (starting with --), an environment assignment, or code."""
    topics: tuple[str, ...]
    """Finding topics that point to this change, most specific first."""
    variant: Variant = field(default_factory=Variant)
    """RunConfig fields the variant changes."""
    compile_mode: str = ""
    """torch.compile mode ("" for none)."""
    cuda_graph: bool = False
    env: dict[str, str] = field(default_factory=dict)
    """Environment of the variant's process (a change that needs a new process)."""
    finding: str = ""
    layers: tuple[int, ...] = ()
    """The layers its finding names: the row shows their times before and after whether they moved most or not."""
    blocked: str = ""
    """Why it is not run ("" when it runs)."""
    parts: tuple[str, ...] = ()
    """A combination (analysis/advice/combos.py): the single levers' keys it combines, measured first."""
    likely: str = ""
    """A combination: the host's units that make it the likely winner whatever its parts did."""

    @property
    def method(self) -> str:
        return PASS_LEVEL if self.env else PAIRED

    @property
    def per_image(self) -> bool:
        return self.variant.batch is not None

    @property
    def has_layers_pass(self) -> bool:
        """A layers pass of the variant gives per-layer times (not under Inductor or a CUDA graph)."""
        return not self.compile_mode and not self.cuda_graph

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "change": self.change,
            "how": self.how,
            "variant": self.variant.to_dict(),
            "compile_mode": self.compile_mode,
            "cuda_graph": self.cuda_graph,
            "env": self.env,
            "finding": self.finding,
            "layers": list(self.layers),
            "method": self.method,
            **({"parts": list(self.parts)} if self.parts else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Candidate:
        return cls(
            d["key"],
            d["change"],
            d["how"],
            (),
            Variant.from_dict(d.get("variant", {})),
            d.get("compile_mode", ""),
            bool(d.get("cuda_graph")),
            dict(d.get("env", {})),
            d.get("finding", ""),
            tuple(d.get("layers", ())),
        )


@dataclass
class RunFacts:
    """What the candidates depend on, read from the advised run."""

    runtime: str
    precision: str
    device: str
    channels_last: bool
    threads: int
    batch: int
    isa_flags: tuple[str, ...] | None
    """None: the run recorded no ISA flags."""
    cpus_busy: float | None = None
    """The forward's time-weighted CPUs busy (layers pass task-clock / wall)."""
    unavailable_runtimes: dict[str, str] = field(default_factory=dict)
    """Runtime name -> why it cannot run here."""
    malloc_libs: dict[str, str] = field(default_factory=dict)
    """Replacement malloc (hardware.malloc_libs.MALLOC_LIBS) -> its library's path here; "" or absent: none."""
