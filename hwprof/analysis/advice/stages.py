"""Where an advice row's end-to-end figure parts from its forward figure: the other stages that moved.

An iteration is load, preprocess, (h2d,) forward and postprocess; both figures of a row come from the same
iterations (the ABBA blocks, or the same two processes). When the forward gets faster by some ms and the
iteration does not, another stage of the variant's iterations grew by about that much (for instance a
runtime's threads that spin after its forward while torch's postprocess runs): the row names that stage and
by how much, rather than leaving two figures that seem to contradict each other.

Pure: from the stages' p50s per side (ms per image) to the deltas and one line of text.
"""

from __future__ import annotations

from dataclasses import dataclass

UNEXPLAINED_SHARE = 0.25
"""End to end and forward disagree when the iteration's change differs from the forward's by more than this
share of the forward's change..."""
UNEXPLAINED_MIN = 0.02
"""...and by more than this share of the baseline's iteration (so that a forward change of a few us on a
long iteration is not called a disagreement)."""


@dataclass
class StageDelta:
    """One stage other than the forward: its p50 in the baseline's and in the variant's iterations (ms)."""

    name: str
    before_ms: float
    after_ms: float

    @property
    def delta_ms(self) -> float:
        return self.after_ms - self.before_ms

    def text(self) -> str:
        return f"{self.name} {self.delta_ms:+.1f} ms ({self.before_ms:.1f}->{self.after_ms:.1f})"


def stage_deltas(before: dict[str, float], after: dict[str, float]) -> list[StageDelta]:
    """Stage p50s of both sides -> the stages both hold, the one that moved most first."""
    rows = [StageDelta(name, ms, after[name]) for name, ms in before.items() if name in after]
    return sorted(rows, key=lambda d: -abs(d.delta_ms))


@dataclass
class StagesMoved:
    """Why end to end and forward disagree: the iteration's change less the forward's, and the stages behind it."""

    forward_delta_ms: float
    iteration_delta_ms: float
    stages: list[StageDelta]

    @property
    def other_ms(self) -> float:
        return self.iteration_delta_ms - self.forward_delta_ms

    def moved(self) -> list[StageDelta]:
        """The stages that account for the difference: those moving the same way, largest first, until they
        hold at least half of it (at least one)."""
        same_way = [d for d in self.stages if d.delta_ms * self.other_ms > 0]
        out: list[StageDelta] = []
        for d in same_way:
            out.append(d)
            if abs(sum(x.delta_ms for x in out)) >= abs(self.other_ms) / 2:
                break
        return out

    def short(self) -> str:
        """For a table cell: the stage(s) that moved, e.g. "postprocess +6.3 ms"."""
        moved = self.moved()
        if not moved:
            return f"other stages {self.other_ms:+.1f} ms"
        return ", ".join(f"{d.name} {d.delta_ms:+.1f} ms" for d in moved)

    def text(self) -> str:
        """One sentence: the two changes and the stages that moved, from the same iterations."""
        moved = self.moved()
        who = "; ".join(d.text() for d in moved) if moved else "no single stage's p50 accounts for it"
        return (
            f"end to end {self.iteration_delta_ms:+.1f} ms against forward {self.forward_delta_ms:+.1f} ms "
            f"(p50s of the same iterations): the variant's other stages moved {self.other_ms:+.1f} ms: {who}"
        )


def stages_moved(
    forward: tuple[float, float] | None, iteration: tuple[float, float] | None, stages: list[StageDelta]
) -> StagesMoved | None:
    """(before, after) p50 ms of the forward and of the iteration -> why they disagree, or None where they agree
    (or a figure is missing)."""
    if forward is None or iteration is None:
        return None
    forward_delta = forward[1] - forward[0]
    iteration_delta = iteration[1] - iteration[0]
    other = iteration_delta - forward_delta
    if abs(other) <= UNEXPLAINED_SHARE * abs(forward_delta) or abs(other) <= UNEXPLAINED_MIN * iteration[0]:
        return None
    return StagesMoved(forward_delta, iteration_delta, stages)
