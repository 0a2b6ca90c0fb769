"""The allocator candidates (issue 38): glibc's tunables, jemalloc and tcmalloc answer a kernel-faults finding,
a missing library is not run with its install command, and the candidate's environment reaches the processes
that measure it (the variant's worker and its layers collect), checked from inside them."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from test_advice_candidates import facts as candidate_facts

from hwprof.advisor.process_env import env_not_taken, mapped_preloads, minor_faults
from hwprof.advisor.runner import AdvisePlan, AdviseRun
from hwprof.analysis.advice.candidate import RunFacts
from hwprof.analysis.advice.candidates import GLIBC_KEEP_FREED, candidates, selected
from hwprof.analysis.advice.rows import measured_row
from hwprof.analysis.advice.table import AdviceRow, top_layer_deltas
from hwprof.analysis.finding import Finding
from hwprof.analysis.paired_cost import PASS_LEVEL
from hwprof.core.config import RunConfig
from hwprof.hardware.malloc_libs import find_malloc_libs, ldconfig_paths
from hwprof.render.advice.table import row_cells
from hwprof.schema.advise_result import AdviseResult, SideFigures
from hwprof.session.stopping import StopSignals

JEMALLOC = "/opt/test/libjemalloc.so.2"


def facts(**kw: Any) -> RunFacts:
    return candidate_facts(**{"threads": 2, "malloc_libs": {"jemalloc": JEMALLOC, "tcmalloc": ""}, **kw})


def faults_finding(layers: tuple[int, ...] = (0,)) -> Finding:
    return Finding("the kernel takes 67% of layer 0", "page faults", "kernels", 0.08, "kernel-faults", layers)


def by_key(cs: list[Any]) -> dict[str, Any]:
    return {c.key: c for c in cs}


def test_a_kernel_faults_finding_proposes_the_allocators_and_only_it_does() -> None:
    cs = by_key(candidates(facts(), [faults_finding()]))
    glibc, jemalloc = cs["malloc-keep"], cs["jemalloc"]
    assert not glibc.blocked and not jemalloc.blocked
    assert glibc.finding == jemalloc.finding == "the kernel takes 67% of layer 0"
    assert glibc.env == GLIBC_KEEP_FREED and "glibc.malloc.mmap_max=0" in glibc.env["GLIBC_TUNABLES"]
    assert jemalloc.env["LD_PRELOAD"] == JEMALLOC and "dirty_decay_ms:-1" in jemalloc.env["MALLOC_CONF"]
    assert glibc.method == jemalloc.method == PASS_LEVEL  # a new process: pass-level estimate
    assert glibc.layers == (0,)  # the row shows the layers the finding names
    other = by_key(candidates(facts(), [Finding("t", "e", "k", 0.5, "efficiency")]))
    for key in ("malloc-keep", "jemalloc"):
        assert "no finding of this run points to it" in other[key].blocked and "kernel-faults" in other[key].blocked


def test_a_missing_malloc_library_is_not_run_with_its_install_command() -> None:
    cs = by_key(candidates(facts(malloc_libs={}), [faults_finding()]))
    assert "fix: apt-get install libjemalloc2" in cs["jemalloc"].blocked
    assert "libtcmalloc_minimal.so.4" in cs["tcmalloc"].blocked and "libtcmalloc-minimal4" in cs["tcmalloc"].blocked
    assert not cs["malloc-keep"].blocked  # glibc's tunables need nothing installed


def test_the_library_search_is_injected_and_prefers_each_mallocs_first_library() -> None:
    only_full = find_malloc_libs(lambda sonames: {"libtcmalloc.so.4": "/x/libtcmalloc.so.4"})
    assert only_full == {"jemalloc": "", "tcmalloc": "/x/libtcmalloc.so.4"}
    both = find_malloc_libs(lambda s: {n: f"/y/{n}" for n in s})
    assert both["tcmalloc"] == "/y/libtcmalloc_minimal.so.4" and both["jemalloc"] == "/y/libjemalloc.so.2"


def test_ldconfig_is_read_for_the_64_bit_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "ldconfig"
    fake.write_text(
        "#!/bin/sh\necho '2 libs found in cache'\n"
        "echo '\tlibjemalloc.so.2 (libc6) => /usr/lib32/libjemalloc.so.2'\n"
        "echo '\tlibjemalloc.so.2 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libjemalloc.so.2'\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    found = ldconfig_paths(["libjemalloc.so.2", "libnothing-here.so.9"])
    assert found == {"libjemalloc.so.2": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"}


def test_the_named_layers_are_shown_even_when_others_moved_more() -> None:
    before = {0: ("Conv", 30.0), 1: ("Conv", 20.0), 2: ("Conv", 10.0), 3: ("Cat", 5.0), 4: ("Conv", 8.0)}
    after = {0: 29.5, 1: 10.0, 2: 4.0, 3: 1.0, 4: 2.0}
    rows = top_layer_deltas(before, after, keep=(0,))
    assert [r.index for r in rows] == [0, 1, 2]  # the named one, then the two that moved most: 3 in all
    assert [r.index for r in top_layer_deltas(before, after, keep=(0, 3, 4, 2))] == [0, 3, 1]  # at most n - 1 named
    assert (rows[0].before_ms, rows[0].after_ms) == (30.0, 29.5)


def pass_level_result(mode: str, faults: list[float], **extra: Any) -> AdviseResult:
    side = {
        "forward_ms": {str(i): 10.0 + i for i in range(4)},
        "iteration_ms": {str(i): 12.0 + i for i in range(4)},
        "batch": 1,
        "minor_faults": {str(i): v for i, v in enumerate(faults)},
        **extra,
    }
    return AdviseResult.from_json({"mode": mode, "sides": {mode: side}}, f"{mode}.json")


def test_the_row_carries_the_faults_per_iteration_of_both_processes() -> None:
    c = by_key(candidates(facts(), [faults_finding()]))["malloc-keep"]
    results = {
        "baseline": pass_level_result("baseline", [13000, 13400, 13300, 13100]),
        "variant": pass_level_result("variant", [0, 2, 1, 0]),
    }
    row = measured_row(c, results, [])
    assert row.minor_faults == [13200.0, 0.5]
    assert AdviceRow.from_dict(row.to_dict()).minor_faults == [13200.0, 0.5]
    assert "faults/iter 13,200->0" in row_cells(row, {})[4]  # the table's layers cell


def test_the_row_carries_the_resident_memory_of_both_processes() -> None:
    """What a faster allocator costs in memory (issue 59): RSS at a measured iteration's end, before -> after."""
    c = by_key(candidates(facts(), [faults_finding()]))["malloc-keep"]
    rss = {"rss_bytes": {str(i): 800e6 + i for i in range(4)}}
    kept = {"rss_bytes": {str(i): 853e6 for i in range(4)}}
    results = {
        "baseline": pass_level_result("baseline", [13000, 13400, 13300, 13100], **rss),
        "variant": pass_level_result("variant", [0, 2, 1, 0], **kept),
    }
    row = measured_row(c, results, [])
    assert row.rss_bytes == [800e6 + 1.5, 853e6]
    assert AdviceRow.from_dict(row.to_dict()).rss_bytes == row.rss_bytes
    assert row_cells(row, {})[4].endswith("RSS MB 800->853")
    older = measured_row(c, {k: pass_level_result(k, [1, 2, 3, 4]) for k in ("baseline", "variant")}, [])
    assert older.rss_bytes is None and "rss_bytes" not in older.to_dict()  # advise files from before


def test_a_variant_whose_preload_did_not_load_is_named() -> None:
    wanted = {"LD_PRELOAD": JEMALLOC, **GLIBC_KEEP_FREED}
    loaded = SideFigures.of(preloaded={JEMALLOC: True}, glibc_tunables=GLIBC_KEEP_FREED["GLIBC_TUNABLES"])
    assert env_not_taken(wanted, loaded) == ""
    skipped = SideFigures.of(preloaded={JEMALLOC: False}, glibc_tunables=GLIBC_KEEP_FREED["GLIBC_TUNABLES"])
    assert "was not loaded in the variant's process" in env_not_taken(wanted, skipped)
    no_tunables = SideFigures.of(preloaded={JEMALLOC: True}, glibc_tunables=None)
    assert "GLIBC_TUNABLES=None" in env_not_taken(wanted, no_tunables)


def small_library() -> str:
    """A shared library a bare Python does not map, to preload in a child."""
    found = ldconfig_paths(["libz.so.1", "libbz2.so.1.0", "liblzma.so.5"])
    if not found:
        pytest.skip("none of libz, libbz2, liblzma is installed to preload")
    return next(iter(found.values()))


CHILD_CHECK = (
    "import json, os, sys; from hwprof.advisor.process_env import mapped_preloads; "
    "json.dump({'tunables': os.environ.get('GLIBC_TUNABLES'), 'preloaded': mapped_preloads()}, "
    "open(sys.argv[1], 'w')); sys.exit(3)"
)


def test_the_variants_environment_reaches_its_layers_collect(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real child stands in for the variant's `hwprof collect`: it reports what it runs with, from inside."""
    lib = small_library()
    seen = tmp_path / "seen.json"
    monkeypatch.setattr(
        "hwprof.advisor.contender_layers.layers_command", lambda *a: [sys.executable, "-c", CHILD_CHECK, str(seen)]
    )
    c = by_key(candidates(facts(), [faults_finding()]))["malloc-keep"]
    c.env = {**c.env, "LD_PRELOAD": lib}
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    config = RunConfig(model="yolov8n", imgsz=64)
    run = AdviseRun(AdvisePlan(run_dir, config, facts(), [c]), StopSignals(), lambda *a: None)
    run.dir.mkdir(parents=True)
    run.layers.baseline = {0: ("Conv", 5.0)}
    row = AdviceRow(c.key, c.change, c.how, c.finding)
    run.layers.fill(row, c, config)
    assert "the variant's layers collect failed" in row.layers_note  # the stand-in exits 3
    import json

    got = json.loads(seen.read_text())
    assert got["tunables"] == GLIBC_KEEP_FREED["GLIBC_TUNABLES"]
    assert got["preloaded"] == {lib: True}


def test_a_preload_shows_in_the_childs_own_maps(tmp_path: Path) -> None:
    import json
    import subprocess

    lib = small_library()
    seen = tmp_path / "seen.json"
    env = {**os.environ, "LD_PRELOAD": lib}
    subprocess.run([sys.executable, "-c", CHILD_CHECK, str(seen)], env=env, check=False)
    assert json.loads(seen.read_text())["preloaded"] == {lib: True}
    line = "7f0000000000-7f0000001000 r-xp 00000000 08:01 42 "
    assert mapped_preloads({"LD_PRELOAD": lib}, maps=line + "/usr/lib/libother.so.1\n") == {lib: False}
    target = os.path.realpath(lib)  # a symlink is mapped under its target's name
    assert mapped_preloads({"LD_PRELOAD": f"{lib}:x.so"}, maps=line + target + "\n") == {lib: True, "x.so": False}
    assert minor_faults() > 0


def test_only_runs_the_keys_asked_for_even_without_a_finding_but_not_a_missing_library() -> None:
    planned = candidates(facts(), [Finding("t", "e", "k", 0.5, "efficiency")])
    chosen = by_key(selected(planned, ["malloc-keep", "tcmalloc"]))
    assert set(chosen) == {"malloc-keep", "tcmalloc"}
    assert not chosen["malloc-keep"].blocked and "asked for with --only" in chosen["malloc-keep"].finding
    assert "fix: apt-get install" in chosen["tcmalloc"].blocked
    with pytest.raises(ValueError, match=r"--only nope: no such candidate for this run; its candidates are .*jemalloc"):
        selected(planned, ["nope"])


def test_advise_and_collect_take_only() -> None:
    from hwprof.cli.advise import advise_request
    from hwprof.cli.args import build_parser

    parser = build_parser()
    assert advise_request(parser.parse_args(["advise", "RUN", "--only", "malloc-keep, jemalloc"])).only == (
        "malloc-keep",
        "jemalloc",
    )
    assert advise_request(parser.parse_args(["collect", "--advise", "--advise-only", "jemalloc"])).only == ("jemalloc",)
    assert advise_request(parser.parse_args(["advise", "RUN"])).only == ()
