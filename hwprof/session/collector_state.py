"""A collector's standing in a pass, kept by the worker (hwprof.session.pass_collectors): ok until one of its
hooks raises, then failed with the hook and the error; and its result as the pass ended (partial or
interrupted when the pass was stopped).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hwprof.collectors.base import Collector, CollectorResult


@dataclass
class Failure:
    """Why a collector failed: the hook that raised and its error ("TypeError: ...")."""

    stage: str
    error: str
    seq: int
    """The order it failed in, among the pass's failures: result.json lists the collectors in the order their
    outcome was known (failed ones first, then the others as they close)."""

    @property
    def reason(self) -> str:
        return f"{self.stage}: {self.error}"


@dataclass
class CollectorRecord:
    """One collector's standing in the pass: ok until a hook of it raises, then failed with the reason; a
    failed collector's hooks are no longer called (but close(), to release what it holds)."""

    collector: Collector
    failure: Failure | None = field(default=None)

    @property
    def ok(self) -> bool:
        return self.failure is None


def mark_pass_end(result: CollectorResult, status: str, error: str) -> CollectorResult:
    """A collector's result as the pass ended: what it kept from a stopped or failed pass is partial, and a
    collector left with nothing because a stop came before its data (no summary, no file) was interrupted,
    not failed."""
    if status != "ok" and result.status in ("ok", "partial"):
        result.status = "partial"
        result.reason = "; ".join(r for r in (f"pass {status}: {error}", result.reason) if r)
    elif status == "interrupted" and result.status == "failed" and not result.summary and not result.artifacts:
        result.status = "interrupted"
        result.reason = f"{error}, before it had data ({result.reason})"
    return result
