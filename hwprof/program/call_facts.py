"""What each marked call of a program's model ran under, of the state the program itself may change between
calls: torch's thread count (torch.set_num_threads), grad mode and inference mode.

hwprof sets the pass's thread count (--threads) before the program starts; a program that sets its own, once or
call by call, measures other counts than the run's config says, and the report must say the program's. Grad mode
decides what a forward is: with grad on (no torch.no_grad / torch.inference_mode around the call) each forward
records its autograd graph, slower than an inference's, and a `.backward()` after it makes the iteration a
training step (hwprof.program.known_stages times it as the `backward` stage). Each is read right after the
forward, in the program's thread and inside its context managers: the state the call ran in.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

WARMUP, MEASURED, CLEAN = "warmup", "measured", "clean"


@dataclass
class CallFacts:
    """Per kind of marked call (warm-up, measured, clean): its calls by torch thread count, and how many ran with
    grad mode on and in inference mode."""

    threads: dict[str, Counter[int]] = field(default_factory=dict)
    grad: Counter[str] = field(default_factory=Counter)
    inference_mode: Counter[str] = field(default_factory=Counter)
    calls: Counter[str] = field(default_factory=Counter)

    def record(self, warmup: bool, measured: bool) -> None:
        """One marked call of the model just returned: `warmup`, else `measured`, else a clean one."""
        import torch

        kind = WARMUP if warmup else MEASURED if measured else CLEAN
        self.calls[kind] += 1
        self.threads.setdefault(kind, Counter())[torch.get_num_threads()] += 1
        if torch.is_grad_enabled():
            self.grad[kind] += 1
        if torch.is_inference_mode_enabled():
            self.inference_mode[kind] += 1

    def thread_counts(self, kind: str = MEASURED) -> dict[str, int]:
        """Calls of `kind` per torch thread count, the counts ascending (as result.json keeps them: string keys)."""
        counts = self.threads.get(kind, Counter())
        return {str(n): counts[n] for n in sorted(counts)}
