"""What `hwprof advise` asks of the workload it advises: the one place that tells hwprof's own pipeline from a
user's program (hwprof.analysis.workload is the same for the report).

A target says which candidates the run's findings point to, how the advised run reads in words, which worker
measures a candidate, what the table's notes say, and whether a variant's layers can be collected. The runner
(hwprof.advisor.runner) asks it and never asks which workload ran.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from hwprof.advisor.children import PAIRED_WORKER, collect_options, paired_command
from hwprof.analysis.advice.combos import with_combinations
from hwprof.analysis.advice.output import undecided_note
from hwprof.core.config import RunConfig
from hwprof.workload.trained import TRAINED_NAMES

if TYPE_CHECKING:
    from hwprof.advisor.program_budget import Budget, CallsSeen
    from hwprof.analysis.advice.candidate import Candidate, RunFacts
    from hwprof.analysis.advice.output import OutputCheck
    from hwprof.analysis.finding import Finding
    from hwprof.rundir.reader import RunData
    from hwprof.schema.advise_result import AdviseSpec


class AdviseTarget(Protocol):
    """The advised workload as advise needs it."""

    def candidates(self, data: RunData, facts: RunFacts, findings: list[Finding]) -> list[Candidate]:
        """The changes to measure, in the table's order (combinations after their parts)."""
        ...

    def baseline(self) -> str:
        """The advised run as the user types it."""
        ...

    def notes(self) -> list[str]:
        """The table's notes before any row: what its rows mean for this workload."""
        ...

    def closing_notes(self, checks: list[OutputCheck]) -> list[str]:
        """The table's notes once every row ran: why its output checks could not decide, and what can."""
        ...

    def layers_note(self) -> str:
        """Why no candidate of this workload gets per-layer times; "" where a layers collect of each can run."""
        ...

    def worker_command(self, spec: AdviseSpec, spec_path: Path) -> list[str]:
        """The worker that measures a candidate on `spec` (written to spec_path)."""
        ...

    def forkable_workers(self) -> tuple[str, ...]:
        """The worker modules advise's zygote may fork (hwprof.session.zygote); none where a worker must start
        as a fresh interpreter."""
        ...

    def schedule(self, data: RunData, blocks: int) -> tuple[CallsSeen | None, Budget | None]:
        """Where the workload owns its loop (a program): the calls of its model the run saw, and the calls each
        candidate's schedule needs (hwprof.advisor.program_budget); (None, None) where advise runs as many
        iterations as it likes."""
        ...


@dataclass(frozen=True)
class PipelineTarget:
    """hwprof's own pipeline (`collect --model`): its candidates are collect's options, measured by the paired
    worker (hwprof.advisor.paired_worker), each with a layers collect of its own."""

    config: RunConfig

    def candidates(self, data: RunData, facts: RunFacts, findings: list[Finding]) -> list[Candidate]:
        return with_combinations(facts, findings)

    def baseline(self) -> str:
        return " ".join(collect_options(self.config))

    def notes(self) -> list[str]:
        return []

    def closing_notes(self, checks: list[OutputCheck]) -> list[str]:
        note = undecided_note(checks, self.config.model, self.config.imgsz, TRAINED_NAMES[0])
        return [note] if note else []

    def layers_note(self) -> str:
        return ""

    def worker_command(self, spec: AdviseSpec, spec_path: Path) -> list[str]:
        return paired_command(spec, spec_path)

    def forkable_workers(self) -> tuple[str, ...]:
        return (PAIRED_WORKER,)

    def schedule(self, data: RunData, blocks: int) -> tuple[CallsSeen | None, Budget | None]:
        return None, None


def target_for(config: RunConfig) -> AdviseTarget:
    """The advised run's workload, from its configuration."""
    from hwprof.advisor.program_target import ProgramTarget

    return ProgramTarget(config) if config.program is not None else PipelineTarget(config)
