"""The run directory's lock names the command that holds it and the fix of the command that found it held."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hwprof.rundir.lock import LOCK_NAME, RunDirBusy, RunDirLock, holder


def test_an_advise_held_lock_is_named_as_advise_and_advise_is_not_told_to_use_out(tmp_path: Path) -> None:
    with RunDirLock(tmp_path, command="advise", fix=""):
        info = holder(tmp_path)
        assert info is not None and info.command == "advise"
        with pytest.raises(RunDirBusy) as second_advise:
            RunDirLock(tmp_path, command="advise", fix="").acquire()
        with pytest.raises(RunDirBusy) as collect:
            RunDirLock(tmp_path).acquire()
    line = str(second_advise.value)
    assert line.startswith(f"{tmp_path} is in use by another hwprof advise (pid ")
    assert line.endswith("; wait for it to finish") and "--out" not in line
    assert str(collect.value).endswith("wait for it to finish or choose another --out")


def test_a_lock_file_from_before_the_command_was_recorded_reads_as_collect(tmp_path: Path) -> None:
    (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": 1, "host": "h", "started": 0.0}))
    from hwprof.rundir.lock import _read_info

    info = _read_info(Path(tmp_path / LOCK_NAME))
    assert info is not None and info.command == "collect"
