"""The torch build of run.json host.torch, kept in hwprof's cache so that `collect`'s own process never imports
torch: the same record as torch says, another key when what decides it changes, a damaged file passed over."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hwprof.core import torch_build as tb
from hwprof.core.host import cpuinfo_text
from hwprof.core.kept import CACHE_VERSION

CODE = (
    "import sys, json\n"
    "from pathlib import Path\n"
    "from hwprof.core.host import cpuinfo_text\n"
    "from hwprof.core.torch_build import torch_build\n"
    "build = torch_build(Path(sys.argv[1]), cpuinfo_text())\n"
    "print(json.dumps([build.to_json(), 'torch' in sys.modules]))\n"
)

KEY = "from hwprof.core.host import cpuinfo_text\nfrom hwprof.core.torch_build import _key\nprint(_key(cpuinfo_text()))"
"""A child's cache key, read without importing torch (the key holds sys.executable as the child sees it)."""


TRUTH = "import json\nfrom hwprof.core.torch_build import read_build\nprint(json.dumps(read_build().to_json()))"


def _truth() -> dict:
    """What torch says of itself in a fresh process (this one's thread count may be another test's: a test that
    called torch.set_num_threads(1) here left 1 behind on the fresh clone of 90ba8da)."""
    done = subprocess.run([sys.executable, "-c", TRUTH], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def _build_in_a_process(cache: Path) -> tuple[dict, bool]:
    """As `collect`'s own process asks for it: torch not imported before."""
    done = subprocess.run([sys.executable, "-c", CODE, str(cache)], capture_output=True, text=True, check=True)
    build, imported = json.loads(done.stdout)
    return build, imported


def test_the_cached_build_is_what_torch_says_and_is_read_without_importing_torch(tmp_path: Path) -> None:
    (first, imported), (second, imported_again) = _build_in_a_process(tmp_path), _build_in_a_process(tmp_path)
    assert imported and not imported_again, "read from torch once, then from the cache"
    assert first == second == _truth()
    assert len(list(tmp_path.glob("torch-build-*.json"))) == 1


def test_another_thread_setting_is_another_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    key = tb._key(cpuinfo_text())
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert key is not None and tb._key(cpuinfo_text()) not in (None, key)


def test_a_damaged_cache_file_is_passed_over_and_an_unwritable_cache_costs_only_time(tmp_path: Path) -> None:
    truth = _truth()
    key = subprocess.run([sys.executable, "-c", KEY], capture_output=True, text=True, check=True).stdout.strip()
    path = tmp_path / f"torch-build-{key}.json"  # where a child writes the build (the first test shows it does)
    for text in ("{not json", json.dumps({"version": CACHE_VERSION, "key": key, "value": {"num_threads": -3}})):
        path.write_text(text)
        build, imported = _build_in_a_process(tmp_path)
        assert build == truth and imported
        assert json.loads(path.read_text())["value"] == truth  # written again from torch
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache folder would be")
    build, imported = _build_in_a_process(blocked / "cache")
    assert build == truth and imported and not (blocked / "cache").exists()


def test_the_profiler_probe_is_kept_once_it_recorded_its_ops_and_a_failed_one_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch.profiler's probe (a child that profiles one matmul, 2.6 s of each collect's plan) under the same key:
    a real probe is written and read back as the same details; a failed one is not kept; a damaged file is
    passed over."""
    from hwprof.collectors.torch_profiler import probe as tp

    probe = tp.probe_torch_profiler
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    probe.cache_clear()
    real = probe(sys.executable)
    (path,) = (tmp_path / "hwprof").glob("torch-profiler-probe-*.json")
    assert real.available and real.details.ok  # type: ignore[attr-defined]
    calls: list[str] = []
    monkeypatch.setattr(tp, "_probe_in_child", lambda python: calls.append(python) or tp.Capability.unavailable("x"))
    probe.cache_clear()
    assert probe(sys.executable) == real and calls == [], "read back from the cache, no child"
    path.write_text(json.dumps({"version": CACHE_VERSION, "key": path.stem[-16:], "value": {"ok": "yes"}}))
    probe.cache_clear()
    assert not probe(sys.executable).available and calls == [sys.executable], "a damaged file: probed again"
    assert json.loads(path.read_text())["value"] == {"ok": "yes"}, "the failed probe was not written over it"
    probe.cache_clear()
