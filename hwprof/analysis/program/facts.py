"""What a program's measured calls ran under that the program set itself, for the report's words: torch's thread
counts (against --threads, which hwprof set before the program started), grad mode, and whether its iterations
held a backward pass (hwprof.program.call_facts, hwprof.program.known_stages). Any other run measured inference
with --threads: its words are unchanged."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hwprof.analysis.workload import workload_view

if TYPE_CHECKING:
    from hwprof.analysis.stages import Stages
    from hwprof.schema.program import ProgramOutcome
    from hwprof.schema.run import RunDoc

INFERENCE = "inference"
TRAINING = "forward + backward"
GRAD_ON = "forward with grad on"
BACKWARD = "backward"
"""The stage of a backward pass (hwprof.program.known_stages.BACKWARD)."""


@dataclass(frozen=True)
class ProgramFacts:
    configured_threads: int
    """--threads (the run's config): what hwprof set before the program ran."""
    threads: dict[int, int] = field(default_factory=dict)
    """Measured calls per torch thread count, as the program left it at each call (empty: not recorded)."""
    measured: int = 0
    grad_calls: int = 0
    """Measured calls with grad mode on."""
    backward_ms: float | None = None
    """The backward stage's p50, where the iterations held one."""

    @property
    def mode(self) -> str:
        """What an iteration's model work was: INFERENCE, TRAINING (a backward pass after the forward) or GRAD_ON
        (forwards that recorded autograd graphs, none used)."""
        if self.backward_ms is not None:
            return TRAINING
        return GRAD_ON if self.grad_calls else INFERENCE

    @property
    def threads_set(self) -> bool:
        """The program's thread counts differ from --threads, or vary from call to call."""
        return bool(self.threads) and set(self.threads) != {self.configured_threads}

    def threads_text(self) -> str:
        """ "2 torch threads", or the program's: "torch threads set by the program: 1 (10 measured calls), 2 (10)"."""
        if not self.threads_set:
            return f"{self.configured_threads} torch threads"
        counts = [f"{n} ({calls})" for n, calls in sorted(self.threads.items())]
        first = sorted(self.threads)[0]
        counts[0] = f"{first} ({self.threads[first]} measured call{'s' if self.threads[first] != 1 else ''})"
        return f"torch threads set by the program: {', '.join(counts)}"

    def grad_text(self) -> str | None:
        """What the measured calls were where not inference, in one line; None for inference."""
        mode = self.mode
        if mode == INFERENCE:
            return None
        share = f"{self.grad_calls} of {self.measured} measured calls" if self.measured else "its measured calls"
        if mode == TRAINING:
            return (
                f"forward + backward: grad mode on ({share}) and a backward pass after the forward (timed as the "
                "backward stage): a training step, not an inference"
            )
        return (
            f"grad mode was on ({share}: no torch.no_grad or torch.inference_mode around them): its forwards "
            "recorded autograd graphs, slower than inference"
        )

    def step_fps(self, batch: int, forward_ms: float) -> float | None:
        """A training step's images per second: batch / (forward p50 + backward p50)."""
        if self.backward_ms is None or forward_ms + self.backward_ms <= 0:
            return None
        return batch * 1e3 / (forward_ms + self.backward_ms)


def program_facts(run: RunDoc, stages: Stages) -> ProgramFacts:
    """The facts of the pass the stages come from (else of the first pass that recorded them)."""
    outcome = _outcome(run, stages.source)
    backward = stages.get(BACKWARD) if workload_view(run).backward_stage else None
    backward_ms = backward.p50_ms if backward is not None else None
    if outcome is None:
        return ProgramFacts(int(run.config.threads or 0), backward_ms=backward_ms)
    return ProgramFacts(
        int(run.config.threads or 0),
        threads={int(n): int(calls) for n, calls in outcome.torch_threads.items()},
        measured=int(outcome.measured_calls),
        grad_calls=int(outcome.grad_calls or 0),
        backward_ms=backward_ms,
    )


def _outcome(run: RunDoc, source: str) -> ProgramOutcome | None:
    """The pass's program outcome (else the first pass's that recorded one); None for a run whose passes recorded
    none (any workload but a program's)."""
    recorded = {n: p.program for n, p in run.passes.items() if p.program is not None and p.program.torch_threads}
    return recorded.get(source) or next(iter(recorded.values()), None)
