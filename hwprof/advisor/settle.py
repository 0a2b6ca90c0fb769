"""The end of advise's race: the contenders among the first rows get more paired blocks, a paired process of
their own at a time, until the rows' order is resolved, their rounds are spent or the settling's share of advise's
time is (the rule: hwprof.analysis.advice.race). Each more process is held to the same guards as the first: a
side that moved beside the other, or other work on the run's CPUs, keeps its blocks out of the figure and ends
that row's settling, said in its row."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hwprof.analysis.advice.candidate import Candidate
from hwprof.analysis.advice.race import SETTLE_BLOCKS, SETTLE_ROUNDS, Order, settled_text, top_order
from hwprof.analysis.advice.rows import append_blocks, busy, forward_ratios, pooled_speedups, sides_moved
from hwprof.analysis.advice.table import Advice, AdviceRow
from hwprof.analysis.neighbours import others_text
from hwprof.perf.neighbours import NeighbourLoad
from hwprof.schema.advise_result import AdviseResult, AdviseSpec

Measure = Callable[[AdviseSpec, Path, Candidate, list[str]], tuple[dict[str, AdviseResult], str]]
"""The runner's: run the worker for each name, (results by name, "") or ({}, why one failed)."""


@dataclass
class Contender:
    """A row whose figure is paired, as the race may extend it: its candidate, the spec its first process ran,
    its paired processes' results and the wall time of one."""

    candidate: Candidate
    spec: AdviseSpec
    work: Path
    results: list[AdviseResult]
    process_s: float
    first_race: str = ""
    """Its row's race text after its first process ("" where it ran the plan's blocks)."""
    ended: str = ""
    """Why it gets no more blocks ("" where it may): a compile, a process whose guard fired, a failure."""

    @property
    def blocks(self) -> int:
        return len(forward_ratios(self.results))

    @property
    def first_blocks(self) -> int:
        return len(forward_ratios(self.results[:1]))


@dataclass
class Settling:
    """The settling of one advise's first rows."""

    advice: Advice
    measure: Measure
    load_of: Callable[[str], NeighbourLoad | None]
    stopped: Callable[[], bool]
    save: Callable[[], None]
    contenders: dict[str, Contender] = field(default_factory=dict)
    spent_s: float = 0.0

    def add(self, contender: Contender) -> None:
        if contender.candidate.compile_mode or contender.candidate.cuda_graph:
            contender.ended = "a compile's or a capture's process pays its set-up again"
        self.contenders[contender.candidate.key] = contender

    def order(self) -> Order:
        ratios = {k: forward_ratios(c.results) for k, c in self.contenders.items()}
        return top_order(self.advice.ordered(), ratios, {k for k, c in self.contenders.items() if not c.ended})

    def run(self, allowance_s: float) -> str:
        """More blocks for the contenders while the order is open, within `allowance_s` of processes; the note
        advice.json and the table keep: the order as it ended, and why the settling stopped."""
        order = self.order()
        for _ in range(SETTLE_ROUNDS):
            if order.settled or not order.extend:
                break
            for key in order.extend:
                if self.stopped():
                    return order.text()
                contender = self.contenders[key]
                if self.spent_s + contender.process_s > allowance_s:
                    return (
                        f"{order.text()}; the settling stopped: {key}'s next process (about "
                        f"{contender.process_s:.0f} s) would pass its share of advise's time ({allowance_s:.0f} s, "
                        f"{self.spent_s:.0f} s spent)"
                    )
                self._more(contender)
                self.save()
            order = self.order()
        if not order.settled and not order.extend:
            return order.text() + self._held(order)
        if not order.settled:
            return f"{order.text()}; the settling's {SETTLE_ROUNDS} rounds are spent (a more process a row each)"
        return order.text()

    def _held(self, order: Order) -> str:
        """Why the rows of the open pairs got no more blocks: each contender's reason, or measured as processes."""
        open_keys = [k for pair in order.open_pairs for k in pair]
        held = [f"{k}: {self.contenders[k].ended}" for k in dict.fromkeys(open_keys) if k in self.contenders]
        processes = [k for k in dict.fromkeys(open_keys) if k not in self.contenders]
        if processes:
            held.append(f"{' and '.join(processes)}: measured as processes (no blocks to add)")
        return "; not given more blocks: " + "; ".join(held) if held else ""

    def _more(self, contender: Contender) -> None:
        """One more paired process of SETTLE_BLOCKS blocks for the contender, pooled into its row where its guards
        hold."""
        c = contender.candidate
        name = f"paired-{len(contender.results) + 1}"
        spec = dataclasses.replace(contender.spec)
        spec.update(blocks=SETTLE_BLOCKS, first_blocks=0, race_bar=None)
        started = time.monotonic()
        results, error = self.measure(spec, contender.work, c, [name])
        self.spent_s += time.monotonic() - started
        row = next(r for r in self.advice.rows if r.key == c.key)
        if error:
            what = "was interrupted" if self.stopped() else f"failed ({error})"
            contender.ended = f"its process {name} {what}; its figure is its earlier processes'"
            return
        result, load = results[name], self.load_of(name)
        why = sides_moved(result)
        if busy(load):
            why = f"other work took the run's CPUs ({others_text(load)})"
        if why:
            contender.ended = f"its process {name} was not pooled: {why}; its figure is its earlier processes'"
            row.race = f"{row.race}; {contender.ended}" if row.race else contender.ended
            return
        before = contender.blocks
        contender.results.append(result)
        append_blocks(c.key, result, self.advice.blocks, after=before)
        self._pooled(row, contender)

    def _pooled(self, row: AdviceRow, contender: Contender) -> None:
        row.forward, row.end_to_end = pooled_speedups(contender.results)
        row.race = settled_text(contender.first_race, contender.first_blocks, contender.blocks, len(contender.results))
