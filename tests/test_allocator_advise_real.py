"""The allocator candidates for real on a small yolov8n: `hwprof advise --only` runs them as two processes each
(pass-level estimate), the variant's process reports its own environment (the row fails if it did not take),
and the row carries each process's page faults per iteration."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from fault_harness import hwprof_command
from run_store import stored_run

from hwprof.analysis.advice.candidates import GLIBC_KEEP_FREED
from hwprof.analysis.advice.table import MEASURED, NOT_RUN, load_advice
from hwprof.hardware.malloc_libs import find_malloc_libs

pytestmark = pytest.mark.slow


def test_advise_only_measures_the_allocators_in_processes_of_their_own(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """From a copy of the suite's stored small run: advise measures baseline and variant in processes of its own
    (the run gives the configuration, not the figures), so a run built under the suite's load changes nothing."""
    stored = stored_run(tmp_path_factory, "small", tmp_path / "run")
    assert stored.returncode == 0, stored.stdout[-2000:] + stored.stderr[-2000:]
    run = stored.path
    env = {**os.environ, "COLUMNS": "120"}
    keys = "malloc-keep,jemalloc,tcmalloc"
    proc = subprocess.run(
        hwprof_command("advise", str(run), "--only", keys, "--blocks", "1", "--no-layers"),
        capture_output=True,
        text=True,
        timeout=1500,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    advice, error = load_advice(run)
    assert advice is not None and not error
    rows = {r.key: r for r in advice.rows}
    assert set(rows) == set(keys.split(","))
    glibc = rows["malloc-keep"]
    assert glibc.status == MEASURED, glibc.reason
    assert glibc.forward is not None and glibc.forward.method == "pass-level estimate"
    assert glibc.minor_faults is not None and len(glibc.minor_faults) == 2
    assert glibc.rss_bytes is not None and all(rss > 50e6 for rss in glibc.rss_bytes)  # a torch process's RSS
    variant = json.loads((run / "advise" / "malloc-keep" / "variant.json").read_text())["sides"]["variant"]
    assert variant["glibc_tunables"] == GLIBC_KEEP_FREED["GLIBC_TUNABLES"]  # seen from inside the variant
    # the output is checked against the baseline's process (without the environment), not a reference built
    # beside the variant in its own process
    assert (run / "advise" / "malloc-keep" / "work" / "baseline-output.pt").is_file()
    assert glibc.output is not None and glibc.output.head_range > 0
    for name, path in find_malloc_libs().items():
        row = rows[name]
        if not path:
            assert row.status == NOT_RUN and "fix: apt-get install" in row.reason
            continue
        assert row.status == MEASURED, row.reason  # a preload that did not map would fail the row
        side = json.loads((run / "advise" / name / "variant.json").read_text())["sides"]["variant"]
        assert side["preloaded"] == {path: True}
