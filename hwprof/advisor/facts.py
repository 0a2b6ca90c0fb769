"""What an advise's candidates depend on, read from the advised run and this host (hwprof.analysis.advice.candidates
chooses them from these facts)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hwprof.analysis.advice.candidate import RunFacts
from hwprof.hardware.malloc_libs import find_malloc_libs

if TYPE_CHECKING:
    from hwprof.core.config import RunConfig
    from hwprof.rundir.reader import RunData


def run_facts(
    data: RunData,
    config: RunConfig,
    cpus_busy: float | None,
    malloc_libs: Callable[[], dict[str, str]] = find_malloc_libs,
) -> RunFacts:
    """What the candidates depend on; `malloc_libs`: where this host's replacement mallocs are (tests inject)."""
    flags = data.doc.host.isa_flags
    missing = {
        r: f"{r} is not installed; fix: pip install {r}"
        for r in ("onnxruntime", "openvino")
        if importlib.util.find_spec(r) is None
    }
    return RunFacts(
        config.runtime,
        config.precision,
        config.device,
        config.channels_last,
        config.threads,
        config.batch,
        tuple(flags) if flags is not None else None,
        cpus_busy,
        missing,
        malloc_libs(),
    )


def cpus_busy(analysis: Any) -> float | None:
    """The forward's time-weighted CPUs busy over its top-level layers (task-clock / wall), as the threads finding."""
    rows = [r for r in analysis.layers.top_level if r.cpus is not None and r.share]
    total = sum(r.share for r in rows)
    return sum(r.cpus * r.share for r in rows) / total if total else None
