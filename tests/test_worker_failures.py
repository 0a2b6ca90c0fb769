"""A pass's collectors that fail: the worker keeps a record per collector (ok, or failed with the hook that
raised and its error), calls no more hooks of a failed one but still closes it, and result.json lists the
failed collectors first, in the order they failed, then the others as they close."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from hwprof.collectors.base import Collector, CollectorResult, PassContext

from hwprof.core.config import RunConfig
from hwprof.rundir.worker_files import write_config
from hwprof.schema.summaries_cpu import Summary
from hwprof.session.collector_state import CollectorRecord
from hwprof.session.pass_runner import PassRunner


@dataclass(kw_only=True)
class _Calls(Summary):
    calls: int | None = None


class _Probe(Collector):
    pass_name = "layers"
    fails_in: str | None = None

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self.calls: list[str] = []

    def _hook(self, stage: str) -> None:
        self.calls.append(stage)
        if stage == self.fails_in:
            raise RuntimeError(f"{self.name} broke")

    def open(self, ctx: PassContext) -> None:
        self._hook("open")

    def start(self, ctx: PassContext) -> None:
        self._hook("start")

    def close(self, ctx: PassContext) -> CollectorResult:
        self._hook("close")
        return CollectorResult("ok", summary=_Calls.of(calls=len(self.calls)))


def _probe(name: str, fails_in: str | None) -> _Probe:
    cls = type(f"Probe_{name}", (_Probe,), {"name": name, "fails_in": fails_in})
    return cls(RunConfig())


def _runner(tmp_path: Path, collectors: list[_Probe]) -> PassRunner:
    write_config(tmp_path, RunConfig(model="yolov8n"))
    (tmp_path / "images.json").write_text(json.dumps({"paths": []}))
    runner = PassRunner(tmp_path, "layers", [])
    runner.collectors = list(collectors)
    runner.records = {c.name: CollectorRecord(c) for c in collectors}
    return runner


def test_a_failed_collector_gets_no_more_hooks_but_close_and_is_listed_first(tmp_path: Path) -> None:
    a, b, c = _probe("a", None), _probe("b", "start"), _probe("c", "open")
    runner = _runner(tmp_path, [a, b, c])
    runner._each("open", runner.ctx)
    runner._each("start", runner.ctx)
    failures = {name: r.failure.reason if r.failure else None for name, r in runner.records.items()}
    assert failures == {"a": None, "b": "start: RuntimeError: b broke", "c": "open: RuntimeError: c broke"}
    assert [r.ok for r in runner.records.values()] == [True, False, False]
    runner._close_all("ok", "")
    assert (a.calls, b.calls, c.calls) == (["open", "start", "close"], ["open", "start", "close"], ["open", "close"])
    result = json.loads((runner.ctx.out_dir / "result.json").read_text())
    assert list(result["collectors"]) == ["c", "b", "a"]  # in the order their outcome was known
    assert result["collectors"]["c"]["status"] == "failed"
    assert result["collectors"]["c"]["reason"] == "open: RuntimeError: c broke"
    assert result["collectors"]["a"] == CollectorResult("ok", summary=_Calls.of(calls=3)).to_dict()


def test_a_collector_failing_in_close_is_failed_in_its_place(tmp_path: Path) -> None:
    a, b = _probe("a", "close"), _probe("b", None)
    runner = _runner(tmp_path, [a, b])
    runner._close_all("interrupted", "stopped")
    result = json.loads((runner.ctx.out_dir / "result.json").read_text())
    assert list(result["collectors"]) == ["a", "b"]
    assert result["collectors"]["a"]["reason"] == "close: RuntimeError: a broke"
    assert result["collectors"]["b"]["status"] == "partial"  # what it kept from a stopped pass
    failure = runner.records["a"].failure
    assert failure is not None and failure.stage == "close"
