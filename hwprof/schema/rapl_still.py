"""What a run records about an energy counter that never moves, shared by the rapl collector (which detects it
while collecting) and the analysis (which sets aside the zeros an older run recorded as measured): the fix text
and the pure check of a series of readings. Here, in the schema, so that the analysis imports no collector code.
"""

from __future__ import annotations

from collections.abc import Sequence

NO_FIX = (
    "none on this host: the energy event is exposed but does not count here (a VM or firmware that passes the "
    "event through without the counter); measure energy on bare metal, where "
    "`perf stat -a -e power/energy-pkg/ sleep 1` shows a non-zero count"
)


def still_domains(rows: Sequence[Sequence[float]], n_domains: int) -> list[int]:
    """Indices of the domains whose value is the same in every row (no row: none is known to be still)."""
    if not rows:
        return []
    first = rows[0]
    return [i for i in range(n_domains) if all(row[i] == first[i] for row in rows)]
