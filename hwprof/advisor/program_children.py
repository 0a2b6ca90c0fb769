"""What `hwprof advise` needs of a program's candidates before its worker runs: the worker's command, the advised
run in words, and why a program's rows have no per-layer times. Apart from hwprof.advisor.program_worker, which
imports torch: the runner imports this module at its start."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from hwprof.core.config import RunConfig
from hwprof.rundir.advise_files import write_advise_spec
from hwprof.schema.advise_result import AdviseSpec

PROGRAM_LAYERS_NOTE = (
    "no per-layer times: a program's variants are measured by their whole forward (a layers collect of a change "
    "made inside the program is not built)"
)

PROGRAM_NOTE = (
    "a program's rows: its own calls of its model are the iterations; paired = the program's model and a changed "
    "copy of it alternate over those calls; the output check = the model's raw output on the program's measured "
    "calls against the unchanged model's on the same inputs (the baseline's run recorded them for a change that "
    "needs a process of its own)"
)

PROGRAM_BLIND_NOTE = (
    "the program's model gives the same head whatever its input (another input moves it {sens:.2g}): its rows' "
    "output checks are blind. hwprof rescales only its own models' random init (hwprof collect --model), never a "
    "program's model: run the program with its trained weights for a check that sees"
)


def program_command(spec: AdviseSpec, spec_path: Path) -> list[str]:
    """The program's advise worker (hwprof.advisor.program_worker) on this spec, written to spec_path."""
    write_advise_spec(spec_path, spec)
    return [sys.executable, "-P", "-m", "hwprof.advisor.program_worker", str(spec_path)]


def program_baseline(config: RunConfig) -> str:
    """The advised run in words: the program's command and its thread count."""
    assert config.program is not None
    return f"-- python {shlex.join(config.program.argv)} --threads {config.threads}"
