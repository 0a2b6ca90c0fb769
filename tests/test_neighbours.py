"""Busy neighbours: other processes' CPU time on the run's CPUs, measured per pass and named.

- the accounting on fake /proc trees (the real layout: /proc/stat cpuN lines, /proc/<pid>/stat with a
  comm holding spaces and parentheses): other = the run's CPUs' busy time less the run's own tree;
- the worker's adaptive ABBA extension: blocks are added while the figure does not resolve, and stop
  at the time bound (checked between a block's pairs), at a collector's iteration limit, on noise the time
  left cannot resolve (block times and ratios injected), or once resolved;
- the report's words on a recorded run.json with neighbours: an unresolved paired cost is never shown
  as a ratio, and a disturbed timing pass is flagged where its figures are used;
- one real collect beside a CPU hog per CPU of the run (slow, fault).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_analysis import make_run
from test_pass_cost import LAYER_MS, _paired_layers_pass, _rewrite_layers_pass

from hwprof.analysis.neighbours import DISTURBED_SHARE, NEGLIGIBLE_SHARE, timing_disturbance
from hwprof.analysis.paired_cost import PassCostFigure
from hwprof.analysis.run_analysis import analyse
from hwprof.core.config import RunConfig
from hwprof.perf.neighbours import NeighbourLoad, NeighbourWatch, neighbours_json, parse_stat, tree
from hwprof.perf.steal import tick_ns
from hwprof.render.export import summary_dict
from hwprof.render.overhead_section import overhead_spec
from hwprof.render.report_sections import stages_spec
from hwprof.rundir.reader import SCHEMA_VERSION, RunData
from hwprof.schema.run import RunDoc
from hwprof.session.paired import extend, schedule

TICK_S = tick_ns() / 1e9


# ----------------------------------------------------------------------------- fake /proc


def _cpu_line(name: str, user: int, system: int, idle: int, steal: int = 0) -> str:
    # cpu user nice system idle iowait irq softirq steal guest guest_nice
    return f"{name} {user} 0 {system} {idle} 0 0 0 {steal} 0 0\n"


class FakeProc:
    """A /proc folder: stat with per-CPU lines, and <pid>/stat files in the kernel's layout."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir()
        self.cpus: dict[int, list[int]] = {}

    def set_cpu(self, cpu: int, user: int, system: int = 0, idle: int = 1000, steal: int = 0) -> None:
        self.cpus[cpu] = [user, system, idle, steal]
        total = [sum(v[k] for v in self.cpus.values()) for k in range(4)]
        text = _cpu_line("cpu ", *total) + "".join(_cpu_line(f"cpu{c}", *v) for c, v in sorted(self.cpus.items()))
        (self.root / "stat").write_text(text + "intr 0\nctxt 0\n")

    def set_proc(
        self, pid: int, comm: str, ppid: int, utime: int, stime: int = 0, cutime: int = 0, cpu: int = 0
    ) -> None:
        # fields 3.. : state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
        # cutime cstime priority nice threads itrealvalue starttime ... processor (field 39)
        after = ["S", ppid, pid, pid, 0, -1, 4194304, 10, 0, 0, 0, utime, stime, cutime, 0, 20, 0, 1, 0, 1000 + pid]
        after += [0] * (39 - 3 - len(after)) + [cpu, 0, 0]
        folder = self.root / str(pid)
        folder.mkdir(exist_ok=True)
        (folder / "stat").write_text(f"{pid} ({comm}) " + " ".join(str(x) for x in after) + "\n")

    def drop(self, pid: int) -> None:
        (self.root / str(pid) / "stat").unlink()
        (self.root / str(pid)).rmdir()


def test_parse_stat_takes_fields_after_the_last_parenthesis(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path / "proc")
    proc.set_proc(42, "my (odd) prog) x", 7, utime=120, stime=30, cutime=5, cpu=1)
    stat = parse_stat(42, (tmp_path / "proc/42/stat").read_text())
    assert stat is not None
    assert (stat.name, stat.ppid, stat.ticks, stat.child_ticks, stat.cpu) == ("my (odd) prog) x", 7, 150, 5, 1)
    assert parse_stat(1, "garbage") is None and parse_stat(1, "1 (x) S 0") is None


def test_other_work_is_busy_time_of_the_run_cpus_less_the_run_own_tree(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path / "proc")
    for cpu in (0, 1, 2):
        proc.set_cpu(cpu, user=1000)
    proc.set_proc(1, "init", 0, 5)
    proc.set_proc(100, "hwprof", 1, 50)  # the run: collect process
    proc.set_proc(101, "python -m hwprof.session.worker", 100, 10)  # its worker
    proc.set_proc(102, "perf (record)", 101, 3)  # a grandchild, reaped during the window
    proc.set_proc(200, "hog (busy) loop", 1, 400, cpu=1)  # outside, on the run's CPUs
    proc.set_proc(300, "elsewhere", 1, 100, cpu=2)  # outside, on a CPU the run may not use
    watch = NeighbourWatch(root=100, cpus={0, 1}, interval_s=0, proc=tmp_path / "proc").start()

    proc.set_proc(100, "hwprof", 1, 60)  # +10
    proc.set_proc(101, "python -m hwprof.session.worker", 100, 110, cutime=23)  # +100, and 102 reaped: +20 (23 - 3)
    proc.drop(102)
    proc.set_proc(200, "hog (busy) loop", 1, 550, cpu=1)  # +150
    proc.set_proc(300, "elsewhere", 1, 900, cpu=2)  # +800, not on cpus 0-1
    proc.set_proc(400, "new one", 1, 30, cpu=0)  # started in the window: all 30
    proc.set_cpu(0, user=1000 + 160, steal=0)
    proc.set_cpu(1, user=1000 + 150, steal=40)  # +150 user, +40 steal
    proc.set_cpu(2, user=1000 + 800)
    time.sleep(1.5)  # 2.2 s of other work on two CPUs: a share below 1 (not clamped), checked within 1%
    load = watch.stop()
    assert load is not None
    own = 10 + 100 + 20
    busy = 160 + 150 + 40
    assert load.own_cpu_s == pytest.approx(own * TICK_S)
    assert load.other_cpu_s == pytest.approx((busy - own) * TICK_S)
    assert load.steal_s == pytest.approx(40 * TICK_S)
    assert load.cpus == [0, 1]
    assert load.share < 1 and load.share == pytest.approx(load.other_cpu_s / (load.wall_s * 2), rel=0.01)
    assert [(o.name, o.pid) for o in load.top] == [("hog (busy) loop", 200), ("new one", 400)]
    assert load.top[0].cpu_s == pytest.approx(150 * TICK_S)
    # the record round-trips through run.json
    back = NeighbourLoad.from_dict(json.loads(json.dumps(neighbours_json(load))))
    assert back == load


def test_a_member_reaped_outside_the_tree_keeps_its_ticks_in_the_run_own_time(tmp_path: Path) -> None:
    """The collect's zygote killed before it reaped its worker (a pass stopped by two signals): init reaps the
    worker, whose ticks then reach no member's cutime. Its ticks at the last scan stay the run's own (they made
    the own time -3.86 s in a suite's run, which run.json's reader then refused)."""
    proc = FakeProc(tmp_path / "proc")
    proc.set_cpu(0, user=1000)
    proc.set_proc(1, "init", 0, 5)
    proc.set_proc(100, "hwprof", 1, 10)  # the collect
    proc.set_proc(101, "hwprof-zygote", 100, 20)
    proc.set_proc(102, "worker", 101, 5)  # forked by the zygote
    proc.set_proc(103, "perf", 102, 7)  # the worker's child, reaped by it in the window
    watch = NeighbourWatch(root=100, cpus={0}, interval_s=0, proc=tmp_path / "proc").start()
    proc.set_proc(102, "worker", 101, 55, cutime=9)  # +50, and 103 reaped: +2 (9 - 7)
    proc.drop(103)
    watch.sample()
    proc.drop(101)  # killed, reaped by the collect: its 20 ticks in the collect's cutime
    proc.drop(102)  # reaped by init: its 64 ticks in no member's cutime
    proc.set_proc(100, "hwprof", 1, 10, cutime=20)
    proc.set_cpu(0, user=1000 + 52)
    load = watch.stop()
    assert load is not None
    assert load.own_cpu_s == pytest.approx(52 * TICK_S)
    assert load.other_cpu_s == pytest.approx(0.0)


def test_busy_ticks_beyond_the_windows_capacity_are_clamped_to_it(tmp_path: Path) -> None:
    """/proc/stat's busy time and the tree's ticks are read apart: on a saturated host a short window once came
    out at 102% (run.json refused the share). The share is at most all of the CPUs' time; the CPU time stays as
    read."""
    proc = FakeProc(tmp_path / "proc")
    proc.set_cpu(0, user=1000)
    proc.set_proc(100, "hwprof", 1, 50)
    watch = NeighbourWatch(root=100, cpus={0}, interval_s=0, proc=tmp_path / "proc").start()
    proc.set_cpu(0, user=1000 + 500)  # 5 s of busy ticks in a window of well under a second
    load = watch.stop()
    assert load is not None
    assert load.share == 1.0 and load.other_cpu_s == pytest.approx(500 * TICK_S)
    NeighbourLoad.from_dict(json.loads(json.dumps(neighbours_json(load))))


def test_a_process_seen_only_in_a_mid_window_scan_is_named(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path / "proc")
    proc.set_cpu(0, user=10)
    proc.set_proc(100, "hwprof", 1, 1)
    watch = NeighbourWatch(root=100, cpus={0}, interval_s=0, proc=tmp_path / "proc").start()
    proc.set_proc(500, "short lived", 1, 70)
    watch.sample()
    proc.drop(500)  # exited before the window ended
    proc.set_cpu(0, user=10 + 80)
    load = watch.stop()
    assert load is not None and [o.name for o in load.top] == ["short lived"]
    assert load.other_cpu_s == pytest.approx(80 * TICK_S)


def test_tree_follows_parents_and_the_own_tree_is_never_an_outsider(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path / "proc")
    proc.set_cpu(0, user=0)
    proc.set_proc(100, "hwprof", 1, 0)
    watch = NeighbourWatch(root=100, cpus={0}, interval_s=0, proc=tmp_path / "proc").start()
    proc.set_proc(101, "worker", 100, 90)  # started in the window, inside the tree
    proc.set_proc(102, "py-spy", 101, 9)
    proc.set_cpu(0, user=99)
    load = watch.stop()
    assert load is not None and load.top == [] and load.other_cpu_s == pytest.approx(0.0)
    assert tree(watch_scan(tmp_path / "proc"), 100) == {100, 101, 102}


def watch_scan(path: Path) -> dict[int, Any]:
    from hwprof.perf.neighbours import scan

    return scan(path)


def test_without_per_cpu_lines_the_load_is_unavailable_with_its_reason(tmp_path: Path) -> None:
    root = tmp_path / "proc"
    root.mkdir()
    (root / "stat").write_text("intr 0\n")
    load = NeighbourWatch(root=1, cpus={0}, interval_s=0, proc=root).start().stop()
    assert load is None
    entry = neighbours_json(load)
    assert entry["status"] == "unavailable" and entry["reason"] and entry["fix"]


def test_the_background_scan_runs_and_stops(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path / "proc")
    proc.set_cpu(0, user=0)
    watch = NeighbourWatch(root=1, cpus={0}, interval_s=0.01, proc=tmp_path / "proc").start()
    deadline = time.monotonic() + 5
    while watch.scans < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    load = watch.stop()
    assert load is not None and load.scans >= 3
    assert watch._thread is not None and not watch._thread.is_alive()


# ----------------------------------------------------------------------------- adaptive ABBA blocks


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _figure(ratios: list[float]) -> PassCostFigure:
    from hwprof.analysis.paired_cost import block_ratios, paired_cost

    on = {i: r for b, r in enumerate(ratios) for i in (2 * b, 2 * b + 1)}
    off = dict.fromkeys(on, 1.0)
    assert block_ratios(on, off) == ratios
    figure = paired_cost(on, off)
    assert figure is not None
    return figure


def _extend(
    ratios: list[float],
    more: list[float],
    planned_s: float,
    config: RunConfig,
    cap: int | None = None,
    step_s: float | list[float] = 0.5,
):
    """Planned blocks with `ratios`; each added block gets the next of `more`; each step takes step_s (a list:
    the added steps' times in turn, the block times a simulated host gives)."""
    clock = FakeClock()
    steps: list[tuple[bool, int]] = []
    current = list(ratios)
    times = iter(step_s) if isinstance(step_s, list) else None

    def step(on: bool, i: int) -> None:
        steps.append((on, i))
        clock.t += next(times) if times is not None else step_s  # type: ignore[operator]
        if len(steps) % 4 == 2:  # a block's first pair: its ratio (a block cut here keeps it)
            current.append(more[len(steps) // 4])

    measured, ext = extend(lambda: _figure(current), step, 2 * len(ratios), planned_s, config, cap, clock)
    return measured, ext, steps


SPREAD = [1.0, 1.5, 0.8, 1.3]
"""Quartiles 0.95-1.35: not resolved."""
NEAR = [0.5, 1.0, 1.08, 1.5]
"""Not resolved (quartiles 0.875-1.185), but one block near 1.04 would resolve it (quartiles 1.00-1.08)."""
NOISY = [0.6, 1.4, 0.7, 1.3, 1.0, 0.5, 1.5, 0.8]
"""A loaded host: 8 blocks' ratios from 0.5 to 1.5."""


def test_a_noisy_series_stops_as_soon_as_the_time_left_cannot_resolve_it() -> None:
    """8 planned blocks took 8 s (limit 8 s); the blocks go on as noisy: the old schedule ran to the time
    limit (8 blocks) for nothing. Now it stops once even every block the time left allows, all at the best
    ratio, could not bring the quartiles within 0.10, and says so."""
    noisy_more = [0.55, 1.45, 0.65, 1.35, 0.75, 1.25, 0.9, 1.1]
    measured, ext, steps = _extend(NOISY, noisy_more, 8.0, RunConfig(), step_s=0.25)
    assert ext is not None and not ext.resolved and ext.stopped_by == "noise"
    assert 0 < ext.added_blocks < 8 and ext.used_s < ext.limit_s
    assert ext.stopped.startswith("noise (the ") and "could not bring the quartiles within 0.10" in ext.stopped
    assert steps == schedule(measured, 16)  # the same ABBA order, numbering on from the planned iterations
    assert (ext.record().text or "").startswith(f"{ext.added_blocks} ABBA block(s) added to the 8 planned")
    assert ext.record().stopped_by == "noise"
    # too spread from the start: not one block is added
    _, hopeless, none = _extend(SPREAD, [], 8.0, RunConfig(paired_extend_ratio=3.0, paired_extend_max_s=4.0))
    assert hopeless is not None and hopeless.limit_s == 4.0 and hopeless.added_blocks == 0 and none == []
    assert hopeless.stopped_by == "noise" and "the 2 block(s) the time left allows" in hopeless.stopped


def test_a_host_that_slows_down_stops_within_the_time_bound() -> None:
    """Planned blocks of 2 s (limit 8 s); the host then takes 3 s per iteration: the old schedule ran a
    12 s block on a 2 s estimate and passed the limit. Now the time is checked between a block's pairs."""
    _, ext, steps = _extend(NEAR, [2.0] * 4, 8.0, RunConfig(), step_s=[3.0] * 8)
    assert ext is not None and ext.stopped_by == "time" and ext.stopped.startswith("time bound (the next pair")
    assert ext.used_s <= ext.limit_s == 8.0 and len(steps) == 2 and ext.added_blocks == 1
    _, zero, none = _extend(NEAR, [2.0] * 4, 8.0, RunConfig(paired_extend_ratio=0.0))
    assert zero is not None and zero.added_blocks == 0 and none == [] and zero.stopped_by == "time"


def test_a_quiet_series_is_resolved_as_before() -> None:
    # adding blocks at 1.1 pulls the quartiles together
    _, ext, _ = _extend(SPREAD, [1.1] * 20, 100.0, RunConfig())
    assert ext is not None and ext.resolved and ext.stopped == "resolved" and 0 < ext.added_blocks < 20
    assert ext.stopped_by == "resolved"
    _, capped, _ = _extend(NEAR, [2.0] * 20, 100.0, RunConfig(), cap=10)
    assert capped is not None and capped.added_blocks == 1 and "limit of 10" in capped.stopped
    assert capped.stopped_by == "iterations"


def test_resolved_planned_blocks_add_nothing_and_an_odd_count_completes_its_block() -> None:
    measured, ext, steps = _extend([1.1, 1.12, 1.1, 1.11], [], 10.0, RunConfig())  # paired_cost.MIN_BLOCKS
    assert ext is None and steps == [] and measured == 8
    assert schedule(5, 3) == [(False, 3), (True, 3), (True, 4), (False, 4)]
    assert schedule(6) == schedule(3) + schedule(6, 3)


# ----------------------------------------------------------------------------- the report's words


HOG = {"name": "python3", "pid": 4242, "cpu_s": 9.5}


def _load(share: float, top: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "wall_s": 10.0,
        "cpus": [0, 1],
        "other_cpu_s": share * 20.0,
        "share": share,
        "steal_s": 0.0,
        "own_cpu_s": 12.0,
        "top": top,
        "scans": 20,
    }


def _spread_run(root: Path, timing: dict[str, Any], layers: dict[str, Any]) -> RunData:
    """The layers pass's blocks spread wide (not resolved), with these neighbour loads recorded."""
    make_run(root)
    markers = _paired_layers_pass(root, 160.0, LAYER_MS, 8)
    slow, shifted, extra = {2, 3, 4, 5}, [], 0
    for m in markers:
        if m.kind == "stage" and m.name == "forward" and m.measured and m.iteration in slow and m.phase == "E":
            extra += 100 * 1_000_000
        shifted.append(dataclasses.replace(m, t_ns=m.t_ns + extra))
    run = json.loads((root / "run.json").read_text())
    run["passes"]["timing"]["neighbours"] = timing
    run["passes"]["layers"]["neighbours"] = layers
    (root / "run.json").write_text(json.dumps(run))
    return _rewrite_layers_pass(root, shifted, {"switched": ["layer markers"], "always_on": []})


def _row(spec: Any, name: str, column: str) -> str:
    heads = [c.header for c in spec.cols]
    return str(next(r for r in spec.rows if r[0] == name)[heads.index(column)])


def test_an_unresolved_cost_names_the_other_work_instead_of_a_ratio(tmp_path: Path) -> None:
    data = _spread_run(
        tmp_path / "busy", _load(0.45, [HOG]), _load(0.5, [HOG, {"name": "cc1", "pid": 7, "cpu_s": 1.0}])
    )
    a = analyse(data)
    layers = next(p for p in a.overheads.passes if p.name == "layers")
    assert layers.cost is not None and not layers.cost.resolved
    cell = _row(overhead_spec(a), "layers", "cost")
    assert cell == "not resolved [1]"  # a status word in the cell, the sentence in note [1] under the table
    assert any(n.startswith("[1] layers: not resolved (other work on these CPUs, 50%") for n in overhead_spec(a).notes)
    assert "x" not in cell.split("(")[0] and f"{layers.cost.ratio:.3f}x" not in cell
    assert _row(overhead_spec(a), "layers", "others") == "50.0%"
    finding = next(f for f in a.findings if "paired cost of the layers pass" in f.title)
    assert "python3 (pid 4242) 9.5 s" in finding.title and f"{layers.cost.ratio:.3f}x" not in finding.title
    assert f"{layers.cost.ratio:.3f}x" not in a.layers.time_note and "not resolved (other work" in a.layers.time_note
    summary = summary_dict(a)
    cost = next(p for p in summary["overheads"]["passes"] if p["name"] == "layers")["cost"]
    assert cost["ratio"] is None and cost["ratio_unresolved"] == pytest.approx(layers.cost.ratio)
    assert cost["resolved"] is False and cost["text"] == layers.cost_text()  # summary.json keeps the short text
    # the timing pass: others took 45% of its CPUs: flagged in the stages and the layer-time note
    assert DISTURBED_SHARE < 0.45
    assert a.stages.disturbed and "python3 (pid 4242)" in a.stages.disturbed
    assert any(n.startswith("the timing pass was disturbed (") for n in stages_spec(a).notes)
    assert (
        a.layers.time_note.startswith("The timing pass was disturbed (see the stages)")
        and "scaled to it" in a.layers.time_note
    )
    assert summary["stages"]["disturbed"] == a.stages.disturbed
    assert any(f.title.startswith("the timing pass was disturbed") for f in a.findings)


def test_unresolved_without_other_work_is_put_down_to_host_noise(tmp_path: Path) -> None:
    quiet = _load(NEGLIGIBLE_SHARE / 2, [])
    data = _spread_run(tmp_path / "quiet", quiet, quiet)
    a = analyse(data)
    spec = overhead_spec(a)
    assert _row(spec, "layers", "cost") == "not resolved [1]"
    assert "[1] layers: not resolved (no other work seen on these CPUs (1.0% of their time); host noise)" in spec.notes
    assert a.stages.disturbed is None and not a.layers.time_note.startswith("The timing pass")
    assert timing_disturbance(data.doc) is None


def test_a_timing_pass_far_slower_than_clean_iterations_is_disturbed(tmp_path: Path) -> None:
    run = {
        "schema_version": SCHEMA_VERSION,
        "status": "ok",
        "passes": {
            "timing": {"status": "ok", "forward_p50_ms": 209.9, "neighbours": {"status": "unavailable", "reason": "x"}},
            "layers": {"status": "ok", "overhead": {"method": "paired", "forward_off_ms": 28.0}},
        },
    }
    text = timing_disturbance(RunDoc.read(run, "run.json"))
    assert text is not None and "7.50x the clean iterations of the layers pass" in text
    run["passes"]["timing"]["forward_p50_ms"] = 30.0
    assert timing_disturbance(RunDoc.read(run, "run.json")) is None


# ----------------------------------------------------------------------------- real collect beside hogs


HOG_CODE = "while True: pass"
CPU_SLACK = 0.8
"""A named process's CPU time in a pass against a hog's share of that pass (its CPU time over the whole
collect, pro rata of wall time: a hog runs steadily): ticks and the uneven scheduler of a busy host."""


def _hog_named_or_outranked(load: NeighbourLoad, hog_pids: set[int], hog_s_per_wall_s: float) -> bool:
    """The hogs are named among the top three, unless three other processes each took more CPU in the
    pass than a hog did. The second can happen on a host shared with other work: this project's VM runs
    several test suites at once, each in its own cgroup, and the CPU controller's fair share between
    cgroups can give a hog (in the test's cgroup, beside the run itself) less than another suite's worker."""
    if {o.pid for o in load.top} & hog_pids:
        return True
    return len(load.top) == 3 and all(o.cpu_s >= CPU_SLACK * hog_s_per_wall_s * load.wall_s for o in load.top)


@pytest.mark.slow
@pytest.mark.fault
def test_a_collect_beside_cpu_hogs_names_them_and_prints_no_unresolved_ratio(run_hwprof, tmp_path: Path) -> None:
    """The collect runs one torch thread: what is named is the other work on the CPUs the run may use (its
    affinity, whatever its thread count), and a two-thread OpenMP team beside a hog per CPU stalls at every barrier
    (a 64-pixel forward took 840 ms instead of 5: 42-95 s for this test, against 10-30 s at one thread)."""
    import psutil

    # one hog per CPU the run may use: two hogs take most of 2 CPUs, but 3% of 64
    hogs = [subprocess.Popen([sys.executable, "-c", HOG_CODE]) for _ in os.sched_getaffinity(0)]
    try:
        out = tmp_path / "run"
        started = time.monotonic()
        result = run_hwprof(
            "collect", "--model", "yolov8n", "--imgsz", "64", "--iters", "6", "--warmup", "1",
            "--only", "timing,flops,perf_events", "--threads", "1", "--out", str(out), timeout=300,
        )  # fmt: skip
        wall = time.monotonic() - started
        hog_cpu = min(sum(psutil.Process(h.pid).cpu_times()[:2]) for h in hogs)
        print(f"collect beside {len(hogs)} hogs: {wall:.1f} s; each hog took >= {hog_cpu:.1f} s CPU")
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert result.returncode == 0, result.stderr[-2000:]
    run = json.loads((out / "run.json").read_text())
    hog_pids = {h.pid for h in hogs}
    for name in ("timing", "layers"):
        load = NeighbourLoad.from_dict(run["passes"][name]["neighbours"])
        assert load.share > DISTURBED_SHARE, (name, load)
        assert _hog_named_or_outranked(load, hog_pids, hog_cpu / wall), (name, load, hog_pids, hog_cpu / wall)
    layers = run["passes"]["layers"]["overhead"]
    assert layers["method"] == "paired"
    summary = json.loads((out / "summary.json").read_text())
    cost = next(p for p in summary["overheads"]["passes"] if p["name"] == "layers")["cost"]
    report = result.stdout
    if not layers["resolved"]:
        assert cost["ratio"] is None and "not resolved (other work on these CPUs" in cost["text"]
        assert f"{layers['ratio']:.3f}x" not in report and "not resolved" in report
        extension = json.loads((out / "passes/layers/result.json").read_text())["paired"]["extension"]
        assert extension["added_blocks"] >= 0 and extension["stopped"]
    assert summary["stages"]["disturbed"] and "pid" in summary["stages"]["disturbed"]
    assert "the timing pass was disturbed" in report


# ----------------------------------------------------------------------------- a disturbed run's report


def test_a_disturbed_run_names_each_passs_neighbours_once(tmp_path: Path) -> None:
    """Every pass of a run beside two other collects and a python process: each pass's neighbours are named once
    in the report (they stood under every finding that rests on the pass: 21 times at 80 columns), and each
    unconfirmed finding says which passes it rests on."""
    from test_report import FIXTURE, render

    run_dir = shutil.copytree(FIXTURE, tmp_path / "run")
    doc = json.loads((run_dir / "run.json").read_text())
    for p in doc["passes"].values():
        wall = p.get("wall_s") or 10.0
        top = [("hwprof", 14527, 0.31), ("hwprof", 14479, 0.29), ("python", 999, 0.1)]
        p["neighbours"] = {
            "status": "ok", "wall_s": wall, "cpus": [0, 1], "other_cpu_s": 0.9 * wall, "share": 0.45,
            "steal_s": 0.0, "own_cpu_s": wall, "scans": 5,
            "top": [{"name": n, "pid": pid, "cpu_s": round(k * wall, 1)} for n, pid, k in top],
        }  # fmt: skip
    (run_dir / "run.json").write_text(json.dumps(doc))
    text = " ".join(render(run_dir, "rich", width=80).split())  # wrapped lines joined
    for name, p in doc["passes"].items():
        named = f"hwprof (pid 14527) {p['neighbours']['top'][0]['cpu_s']:.1f} s"
        # once where a figure rests on the pass (Scalene's rests on none here: never named)
        assert text.count(named) == (0 if name == "scalene" else 1), (name, named, text.count(named))
    assert "unconfirmed: rests on the timing and layers passes (unfit: above)" in text
    assert text.count("the timing pass was disturbed (other work") == 1  # the stages' note; elsewhere pointed to
