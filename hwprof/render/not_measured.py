"""The "not measured" block, grouped by cause: collectors that miss their figures for the same reason (and fix)
share one line ("cuda_graph, gpu_kineto, nvml: not a GPU run"), so a CPU run's block is a few lines, not one
paragraph per collector. Skipped collectors are one line of names."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hwprof.analysis.run_analysis import Analysis


def _cause(reason: str) -> str:
    """A reason's cause: its words before the first ": " ("the run is on the CPU (--device cpu)" of "...: no CUDA
    activity to record"), so that collectors whose reasons only add a detail share a line."""
    return reason.split(": ", 1)[0]


def grouped_unavailable(a: Analysis) -> list[tuple[str, str, str]]:
    """(collectors, status, reason; fix), one per cause, in the order the causes first appear; a group shows its
    shortest reason with its fix."""
    groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
    skipped: list[str] = []
    for name, entry in a.unavailable.items():
        if entry["status"] == "skipped":
            skipped.append(name)
            continue
        text = entry["reason"] + (f"; fix: {entry['fix']}" if entry["fix"] else "")
        groups.setdefault((entry["status"], _cause(entry["reason"])), []).append((name, text))
    out = [
        (", ".join(n for n, _ in members), status, min((t for _, t in members), key=len))
        for (status, _), members in groups.items()
    ]
    if skipped:
        out.append((", ".join(skipped), "skipped", "not requested for this run"))
    return out
