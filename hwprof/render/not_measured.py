"""The "not measured" block, grouped by cause: collectors that miss their figures for the same reason (and fix)
share one line ("cuda_graph, gpu_kineto, nvml: not a GPU run"), so a CPU run's block is a few lines, not one
paragraph per collector. Skipped collectors are one line of names."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hwprof.analysis.run_analysis import Analysis


def grouped_unavailable(a: Analysis) -> list[tuple[str, str, str]]:
    """(collectors, status, reason; fix), one per distinct cause, in the order the causes first appear."""
    groups: dict[tuple[str, str], list[str]] = {}
    skipped: list[str] = []
    for name, entry in a.unavailable.items():
        if entry["status"] == "skipped":
            skipped.append(name)
            continue
        text = entry["reason"] + (f"; fix: {entry['fix']}" if entry["fix"] else "")
        groups.setdefault((entry["status"], text), []).append(name)
    out = [(", ".join(names), status, text) for (status, text), names in groups.items()]
    if skipped:
        out.append((", ".join(skipped), "skipped", "not requested for this run"))
    return out
