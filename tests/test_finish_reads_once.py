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
    data = finalize(root, json.loads((root / "run.json").read_text()))
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
