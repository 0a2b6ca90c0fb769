"""Energy counters that never move: offered by the kernel, read without error, and always the same.

Seen on a 16-CPU Xeon VM: perf's `power` PMU offered `energy-psys`, every read succeeded, and the
count never changed (0 changes in 9,856 reads over 50 ms, and none over 20 measured iterations).
Energy differences of such a counter are exact zeros that were never measured; hwprof reports the
domain as unavailable instead. A real RAPL counter advances about every millisecond whenever the
package is powered, so a counter that stays put over a whole measured pass does not count.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from hwprof.schema.rapl_still import NO_FIX, still_domains
from hwprof.schema.summaries_cpu import RaplStillCounters

__all__ = ["NO_FIX", "PROBE_BUDGET_S", "StillCounters", "first_change_s", "still_domains"]

PROBE_BUDGET_S = 0.2
"""How long the probe polls for a first change: 200 RAPL update steps."""


def first_change_s(read: Callable[[], float], budget_s: float = PROBE_BUDGET_S) -> tuple[float | None, int]:
    """Seconds until the counter first changed (None: not within budget_s), and the reads made."""
    start = time.monotonic()
    last = read()
    reads = 1
    while (elapsed := time.monotonic() - start) < budget_s:
        value = read()
        reads += 1
        if value != last:
            return elapsed, reads
    return None, reads


@dataclass(frozen=True)
class StillCounters:
    labels: list[str]
    reads: int
    iterations: int
    seconds: float

    def reason(self) -> str:
        what = ", ".join(self.labels)
        return (
            f"the energy counter {what} never changed during the {self.iterations} measured iterations "
            f"({self.reads} reads over {self.seconds:.1f} s): it is offered but does not count on this machine"
        )

    def record(self) -> RaplStillCounters:
        """The summary's still_counters."""
        return RaplStillCounters.of(
            domains=self.labels,
            reads=self.reads,
            iterations=self.iterations,
            seconds=round(self.seconds, 3),
            reason=self.reason(),
        )
