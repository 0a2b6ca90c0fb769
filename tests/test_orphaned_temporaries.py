"""A worker killed mid-write (a second stop signal SIGKILLs it) leaves its atomic writer's temporary file: the
collect removes those of writers no longer running once the pass's processes are gone, and no other."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from hwprof.core.atomic import atomic_path, remove_orphaned_temporaries

KILLED_MID_WRITE = (
    "import os, signal, sys; from pathlib import Path; from hwprof.core.atomic import atomic_path\n"
    "with atomic_path(Path(sys.argv[1]) / 'torch_profiler.sync.json') as tmp:\n"
    "    tmp.write_text('{'); os.kill(os.getpid(), signal.SIGKILL)\n"
)
"""A real process that opens its temporary file beside torch_profiler.sync.json and is SIGKILLed there."""


def _killed_in(folder: Path, code: str) -> Path:
    """Run `code` (which kills itself mid-write) on `folder`; the one temporary file it left."""
    done = subprocess.run([sys.executable, "-c", code, str(folder)], check=False)
    assert done.returncode == -9
    (left,) = folder.glob("*.tmp")
    return left


def test_a_killed_writers_temporary_is_removed_a_live_ones_kept(tmp_path: Path) -> None:
    passes = tmp_path / "passes" / "trace"
    passes.mkdir(parents=True)
    left = _killed_in(passes, KILLED_MID_WRITE)
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
    proc = subprocess.Popen([sys.executable, "-c", KILLED_MID_WRITE, str(tmp_path)])
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


def test_kineto_killed_mid_export_leaves_a_temporary_that_is_removed(tmp_path: Path) -> None:
    """Kineto writes <given path>.tmp and renames it; a trace pass stopped twice killed its worker there and left
    `torch_profiler.kineto.json.tmp` (a fresh clone's fault_signals trace-SIGINT-twice). export_trace hands Kineto
    atomic_path's temporary, so Kineto's own names the worker's pid. The stand-in export does what Kineto does
    (as in test_file_size_limit); the process is really killed mid-write."""
    code = (
        "import os, signal, sys; from pathlib import Path\n"
        "from hwprof.collectors.torch_profiler.kineto import export_trace\n"
        "class Kineto:\n"
        "    def export_chrome_trace(self, path):\n"
        "        Path(path + '.tmp').write_text('{\"traceEvents\": ['); os.kill(os.getpid(), signal.SIGKILL)\n"
        "export_trace(Kineto(), Path(sys.argv[1]) / 'torch_profiler.kineto.json')\n"
    )
    left = _killed_in(tmp_path, code)
    assert remove_orphaned_temporaries(tmp_path) == [left]
    assert list(tmp_path.iterdir()) == []
