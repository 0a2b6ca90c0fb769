"""The end of a collect reads its run once: finalize gives the finished run (as RunData.load reads it) with
the markers it parsed, and the exports, the report and the trace use it and one analysis (issue 28)."""

from __future__ import annotations

import collections
import json
import shutil
from pathlib import Path

import pytest

import hwprof.rundir.reader as reader
from hwprof.analysis.run_analysis import analyse
from hwprof.render.export import report_files
from hwprof.rundir.reader import RunData
from hwprof.schema.run import RunDoc
from hwprof.session.finish import finalize, write_final_exports
from hwprof.trace.perfetto import build_trace

FIXTURE = Path(__file__).parent / "fixtures" / "rundir_small"


def test_finish_parses_each_pass_markers_once_and_gives_what_a_load_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "run"
    shutil.copytree(FIXTURE, root)
    parsed: collections.Counter[str] = collections.Counter()
    read = reader.read_marker_file

    def counted(path: Path) -> object:
        parsed[Path(path).parent.name] += 1
        return read(path)

    monkeypatch.setattr(reader, "read_marker_file", counted)
    data = finalize(root, RunDoc.load(root / "run.json"))
    analysis = write_final_exports(data)
    build_trace(root, tmp_path / "once.pftrace", data=data)
    assert parsed and set(parsed.values()) == {1}, parsed  # derivation, exports and trace: one parse each

    monkeypatch.undo()
    loaded = RunData.load(root)
    assert data.doc.to_json() == loaded.doc.to_json()
    assert data.warnings == loaded.warnings
    fresh = analyse(loaded)
    assert report_files(analysis) == report_files(fresh)
    build_trace(root, tmp_path / "fresh.pftrace")
    assert (tmp_path / "once.pftrace").read_bytes() == (tmp_path / "fresh.pftrace").read_bytes()


def test_the_session_writes_run_json_from_its_typed_document(tmp_path: Path) -> None:
    """A pass recorded by the session: typed in run.json's document (PassDoc, CollectorEntry with its typed
    summary, RuntimeDoc), written in the order the dict was, and read back the same."""
    from hwprof.collectors.base import CollectorResult

    from hwprof.core.config import RunConfig
    from hwprof.schema.pass_files import RuntimeFile
    from hwprof.schema.run import CollectorEntry, RuntimeDoc
    from hwprof.schema.run_passes import PassDoc
    from hwprof.schema.runtime_checks import ClockDoc, ProfiledPass
    from hwprof.schema.summaries_cpu import TimingSummary
    from hwprof.session.collection import PassOutcome, Session
    from hwprof.workload.images import ImageSet

    session = Session(RunConfig(), tmp_path, ImageSet([]))
    session.run = RunDoc.of(schema_version=1, run_id="r", status="running", collectors={}, passes={})
    result = CollectorResult("ok", summary=TimingSummary.of(fps=12.5))
    clock = {"method": "monotonic", "offset_ns": 0}
    runtime = RuntimeFile.of(runtime="torch", precision="fp32", clock=ClockDoc.from_json(clock, "runtime.json"))
    session._record(PassOutcome("timing", "ok", 0, 1.23456, 42, results={"timing": result}, runtime=runtime))
    doc = session.run
    assert isinstance(doc.passes["timing"], PassDoc) and doc.passes["timing"].wall_s == 1.235
    entry = doc.collectors["timing"]
    assert isinstance(entry, CollectorEntry) and isinstance(entry.summary, TimingSummary)
    assert entry.pass_name == "timing" and entry.summary.fps == 12.5
    assert isinstance(doc.runtime, RuntimeDoc) and doc.runtime.profiled_passes is not None
    assert isinstance(doc.runtime.profiled_passes["timing"], ProfiledPass)
    assert doc.runtime.profiled_passes["timing"].to_json() == {"clock": clock}
    written = json.loads((tmp_path / "run.json").read_text())
    assert list(written) == ["schema_version", "run_id", "status", "collectors", "passes", "runtime"]
    assert list(written["passes"]["timing"]) == [
        "status", "returncode", "wall_s", "pid", "error", "collectors", "log", "host_steal_share", "neighbours",
        "worker_start",
    ]  # fmt: skip
    assert written["passes"]["timing"]["worker_start"] == "started"  # the outcome's worker was not forked
    assert list(written["runtime"]) == ["name", "runtime", "precision", "profiled_passes"]
    assert RunDoc.load(tmp_path / "run.json").to_json() == written
