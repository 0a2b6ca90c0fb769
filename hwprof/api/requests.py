"""What a collect, an advise and a compare (its gate) are asked to do, typed: the front door's one description of
each (a sweep's is hwprof.api.sweeping.SweepRequest).

The command line builds these from its options (hwprof.cli.collect, hwprof.cli.advise, hwprof.cli.gate_args), the
library from its keyword arguments (hwprof.api.commands); both hand them to the same functions
(hwprof.api.collecting, hwprof.api.advising, hwprof.api.comparing), so a value is checked, and refused with the
same line, whichever door it came through.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hwprof.core.config import ADVISE_BLOCKS, RunConfig
from hwprof.core.program_spec import ProgramSpec

if TYPE_CHECKING:
    from hwprof.analysis.gate.verdict import GateOptions
    from hwprof.render.gate import GateOutputs
    from hwprof.schema.codec import JsonObject

GATE_FILES = (("--gate-report", "gate_report"), ("--junit", "junit"), ("--gate-json", "gate_json"))
"""The gate's output files: option, CompareRequest's field."""


@dataclass(frozen=True)
class AdviseRequest:
    """`hwprof advise RUN` (and `collect --advise`): which candidates run, how long, with what."""

    blocks: int = ADVISE_BLOCKS
    """ABBA blocks per candidate (4 iterations each)."""
    layers: bool = True
    """Each variant also gets a layers collect (per-layer deltas); False: `--no-layers`."""
    only: tuple[str, ...] = ()
    """Just these candidates' keys (`--only`), each run even where no finding of the run points to it."""

    def __post_init__(self) -> None:
        if isinstance(self.blocks, bool) or not isinstance(self.blocks, int):
            raise ValueError(f"--blocks must be an integer (got {self.blocks!r})")
        if self.blocks < 1:
            raise ValueError(f"--blocks must be at least 1 (got {self.blocks})")


@dataclass(frozen=True)
class CollectRequest:
    """`hwprof collect`: the run's configuration and where it goes, what is printed, and what follows it."""

    config: RunConfig
    out: Path | None = None
    """The run directory to create; None: a new one under `results`."""
    results: Path = Path("results")
    report: bool = True
    """Print the report at the end (its files are written either way)."""
    advise: AdviseRequest | None = None
    """Run the candidates once the passes are done (`collect --advise`)."""
    command_line: tuple[str, ...] = field(default=())
    """What run.json records as the command (the command line's words; the library's call as words)."""
    config_file: JsonObject | None = None
    """The `--config` file the options came from (path, format, text): run.json keeps it with the run."""


def csv_list(value: str) -> list[str]:
    """A comma list as the command line takes it (`--only timing,flops`): items stripped, empty ones dropped."""
    return [v.strip() for v in value.split(",") if v.strip()]


UNITS_S = {"s": 1.0, "m": 60.0, "h": 3600.0}


def duration_s(text: str) -> float:
    """A time as the command line takes it: 90, 90s, 1.5m or 1h, in seconds; 0 for none."""
    word = text.strip().lower()
    scale = UNITS_S.get(word[-1:]) if word else None
    number = word[:-1] if scale is not None else word
    try:
        seconds = float(number) * (scale or 1.0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a time such as 90s, 2m or 90 (seconds), not {text!r}") from None
    if not seconds >= 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"a time of 0 (none) or more, not {text!r}")
    return seconds


def program_of(
    command: Sequence[str] | None,
    model_path: str | None = None,
    end: str = "stop",
    stages: Sequence[str] = (),
    stdin: str | None = None,
) -> ProgramSpec | None:
    """The program after `--` (or the library's program=), or None; a program option without one is refused."""
    from hwprof.core.program_spec import program_spec

    if command is None:
        given = (("--program-model", model_path), ("--stage", stages), ("--program-stdin", stdin))
        used = [option for option, value in given if value]
        if used:
            raise ValueError(f"{used[0]} is for a program: `hwprof collect [options] -- python SCRIPT ARGS`")
        return None
    if end not in ("stop", "run"):
        raise ValueError(f"--program-end is 'stop' or 'run' (got {end!r})")
    return program_spec(list(command), model_path=model_path, end=end, stages=list(stages), stdin=stdin)


def gate_options(
    fail_above: str | float,
    share: str | float = "2%",
    confidence: str | float = "95%",
    resamples: int = 2000,
    seed: int = 0,
    unresolved: str = "pass",
    count_threshold: str | float = "0.5%",
    miss_threshold: str | float | None = None,
    gate_on: str = "both",
    layer_stat: str = "share",
    gate_different: bool = False,
    paired: int = 0,
) -> GateOptions:
    """The performance gate's options (`hwprof compare BASE NEW --fail-above PCT ...`, hwprof.gate), each
    percentage as the command line takes it ("5%" or 5); GateError (a ValueError, one line naming the option)
    for a value the gate cannot use."""
    from hwprof.analysis.gate.verdict import GateError, GateOptions, parse_percent

    choices = (("--unresolved", unresolved, ("pass", "fail")), ("--layer-stat", layer_stat, ("share", "ms")))
    for option, value, allowed in (*choices, ("--gate-on", gate_on, ("both", "time", "counts"))):
        if value not in allowed:
            raise GateError(f"{option} is {' or '.join(repr(a) for a in allowed)} (got {value!r})")
    if paired and paired < 5:
        raise GateError(f"--paired needs at least 5 ABBA blocks (got {paired})")
    if resamples < 100:
        raise GateError(f"--resamples must be at least 100 (got {resamples})")
    level = parse_percent(str(confidence), "--confidence")
    if not 0.5 <= level < 1:
        raise GateError(f"--confidence must be between 50% and 100% (got {confidence})")
    return GateOptions(
        fail_above=parse_percent(str(fail_above), "--fail-above"),
        share=parse_percent(str(share), "--gate-share"),
        confidence=level,
        resamples=resamples,
        seed=seed,
        unresolved_fails=unresolved == "fail",
        count_threshold=parse_percent(str(count_threshold), "--count-threshold"),
        allow_different=gate_different,
        gate_on=gate_on,
        layer_stat=layer_stat,
        miss_threshold=parse_percent(str(miss_threshold), "--miss-threshold") if miss_threshold else None,
    )


@dataclass(frozen=True)
class CompareRequest:
    """`hwprof compare RUN...` (hwprof.compare; hwprof.gate with a gate): the runs, how the comparison is printed,
    and the performance gate where one is asked for."""

    runs: tuple[Path, ...]
    """Run directories; the first is the baseline (BASE)."""
    top: int = 15
    """Layers shown in the printed layer tables, slowest first."""
    format: str = "rich"
    """What is printed: rich, markdown, json or html."""
    gate: GateOptions | None = None
    """--fail-above PCT and the gate's other options (gate_options); None: the comparison alone."""
    paired: int = 0
    """--paired BLOCKS: the gate measures BASE's and NEW's configurations again in ABBA blocks (0: as recorded)."""
    gate_report: Path | None = None
    """The verdict as markdown (--gate-report FILE.md)."""
    junit: Path | None = None
    """JUnit XML, one test case per gated figure (--junit FILE.xml)."""
    gate_json: Path | None = None
    """The verdict and every figure as JSON (--gate-json FILE.json)."""

    def __post_init__(self) -> None:
        from hwprof.analysis.gate.verdict import GateError
        from hwprof.render.compare.views import COMPARE_FORMATS

        object.__setattr__(self, "runs", tuple(Path(r) for r in self.runs))
        for name in ("top", "paired"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"--{name} must be an integer (got {value!r})")
        if len(self.runs) < 2:
            raise ValueError("compare needs at least two run directories")
        if self.format not in COMPARE_FORMATS:
            raise ValueError(f"--format must be one of {', '.join(COMPARE_FORMATS)} (got {self.format!r})")
        if self.top < 1:
            raise ValueError(f"--top must be at least 1 (got {self.top})")
        if self.gate is None:
            asked = [option for option, name in GATE_FILES if getattr(self, name) is not None]
            if asked:
                raise GateError(f"{', '.join(asked)} needs --fail-above PCT (the gate's threshold)")
            return
        option = "--paired" if self.paired else "--fail-above"
        if len(self.runs) != 2:
            raise GateError(f"{option} gates two runs, BASE and NEW (got {len(self.runs)})")
        if self.paired and self.paired < 5:
            raise GateError(f"--paired needs at least 5 ABBA blocks (got {self.paired})")

    @property
    def outputs(self) -> GateOutputs:
        """The gate's files asked for."""
        from hwprof.render.gate import GateOutputs

        return GateOutputs(self.gate_report, self.junit, self.gate_json)
