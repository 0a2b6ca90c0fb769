"""What hwprof makes from a run directory, as one folder of files that can be compared byte for byte: the
report in every format, the exports (summary.json, layers.csv) and the trace, rebuilt from a copy of the
run directory. Issue 28's check that a refactor changed no output.

    python scripts/output_snapshot.py OUT RUN_DIR [RUN_DIR ...]
    diff -r BEFORE AFTER

Each run directory is copied first (the report rewrites summary.json and layers.csv; the trace is rebuilt),
so the originals are left as they were. The Rich report is printed at a fixed width with colour off.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FORMATS = ("rich", "json", "csv", "markdown")
EXPORTS = ("summary.json", "layers.csv", "advice.csv")


def hwprof(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    return subprocess.run([sys.executable, "-m", "hwprof", *args], capture_output=True, text=True, env=env)


def snapshot(run_dir: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="hwprof-snap-") as tmp:
        copy = Path(tmp) / run_dir.name
        shutil.copytree(run_dir, copy, symlinks=True)
        for fmt in FORMATS:
            got = hwprof("report", str(copy), "--format", fmt)
            text = got.stdout.replace(str(copy), "<RUN>").replace(tmp, "<TMP>")
            (out / f"report.{fmt}.txt").write_text(f"exit {got.returncode}\n{text}")
        for name in EXPORTS:
            if (copy / name).exists():
                shutil.copy(copy / name, out / name)
        got = hwprof("trace", str(copy))
        (out / "trace.exit.txt").write_text(f"exit {got.returncode}\n")
        trace = copy / "trace.pftrace"
        if trace.exists():
            digest = hashlib.sha256(trace.read_bytes()).hexdigest()
            (out / "trace.sha256").write_text(digest + "\n")


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    out = Path(argv[0])
    for i, run in enumerate(argv[1:]):
        run_dir = Path(run)
        snapshot(run_dir, out / f"{i:02d}-{run_dir.name}")
        print(f"{run_dir} -> {out / f'{i:02d}-{run_dir.name}'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
