"""A worker killed mid-write (a second stop signal SIGKILLs it) leaves its atomic writer's temporary file: the
collect removes those of writers no longer running once the pass's processes are gone, and no other."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from hwprof.core.atomic import atomic_path, remove_orphaned_temporaries


def _killed_mid_write(folder: Path) -> Path:
    """A real process that opened its temporary file beside torch_profiler.sync.json and was SIGKILLed there."""
    code = (
        "import os, signal, sys; from pathlib import Path; from hwprof.core.atomic import atomic_path\n"
        "with atomic_path(Path(sys.argv[1]) / 'torch_profiler.sync.json') as tmp:\n"
        "    tmp.write_text('{'); os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(folder)], check=False)
    assert done.returncode == -9
    (left,) = folder.glob(".*.tmp")
    return left


def test_a_killed_writers_temporary_is_removed_a_live_ones_kept(tmp_path: Path) -> None:
    passes = tmp_path / "passes" / "trace"
    passes.mkdir(parents=True)
    left = _killed_mid_write(passes)
    reserve = tmp_path / ".hwprof-space-reserve.tmp"  # no writer's pid in its name: never a writer's temporary
    reserve.write_bytes(b"x")
    with atomic_path(passes / "result.json") as mine:  # this process, still writing
        mine.write_text("{}")
        assert remove_orphaned_temporaries(tmp_path) == [left]
        assert mine.exists()
    assert not left.exists() and reserve.exists()
    assert (passes / "result.json").read_text() == "{}"


def test_an_unreaped_killed_writers_temporary_is_removed(tmp_path: Path) -> None:
    """The writer is a zombie: killed, not reaped yet (a forked worker whose zygote the second signal killed too
    stays one until init reaps it). It writes nothing: its temporary is removed (it was kept, seen in a fresh
    clone's fault_signals trace-SIGINT-twice)."""
    code = (
        "import os, signal, sys; from pathlib import Path; from hwprof.core.atomic import atomic_path\n"
        "with atomic_path(Path(sys.argv[1]) / 'torch_profiler.sync.json') as tmp:\n"
        "    tmp.write_text('{'); os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)])
    try:
        deadline = time.monotonic() + 60
        while (Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z") and (
            time.monotonic() < deadline
        ):
            time.sleep(0.02)
        (left,) = tmp_path.glob(".*.tmp")
        assert remove_orphaned_temporaries(tmp_path) == [left]
        assert Path(f"/proc/{proc.pid}").exists()  # still unreaped when its temporary was removed
    finally:
        assert proc.wait() == -9
