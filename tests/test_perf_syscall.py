"""The ctypes perf_event_open layer, for real on this host (software events always open)."""

from __future__ import annotations

import ctypes
import errno
import hashlib
import os
import struct
import threading
import time
from typing import Any

import pytest
from small_pages import touch_small_pages

from hwprof.perf.events import EventResolver, EventSpec
from hwprof.perf.open_errors import explain
from hwprof.perf.steal import CpuTimeBand, cpu_count, uncharged_ns
from hwprof.perf.syscall import (
    PERF_TYPE_SOFTWARE,
    READ_FORMAT,
    CounterGroup,
    PerfEventAttr,
    PerfOpenError,
    make_attr,
    parse_group,
    try_open,
)

DATA = b"x" * (1 << 22)


def _burn(rounds: int) -> None:
    for _ in range(rounds):
        hashlib.sha256(DATA).digest()  # releases the GIL: threads really run in parallel


def _cpu_ns() -> int:
    return time.clock_gettime_ns(time.CLOCK_PROCESS_CPUTIME_ID)


def _spec(name: str) -> EventSpec:
    return EventResolver().resolve(name)


def test_attr_layout_and_flags() -> None:
    assert ctypes.sizeof(PerfEventAttr) == 112  # PERF_ATTR_SIZE_VER5
    attr = make_attr(_spec("task-clock"), disabled=True, inherit=True, exclude_kernel=True)
    assert (attr.type, attr.config, attr.size) == (PERF_TYPE_SOFTWARE, 1, 112)
    assert attr.read_format == READ_FORMAT == 0b1111
    assert attr.flags == 0b1 | 0b10 | (1 << 5) | (1 << 6)


def test_parse_group_maps_ids_to_member_order() -> None:
    raw = struct.pack("<3Q", 2, 1000, 500) + struct.pack("<2Q", 7, 42) + struct.pack("<2Q", 9, 41)
    reading = parse_group(raw, {41: 0, 42: 1})
    assert (reading.enabled, reading.running, reading.values) == (1000, 500, (9, 7))
    assert parse_group(raw).values == (7, 9)


def test_group_read_counts_threads_created_after_open() -> None:
    group = CounterGroup.open([_spec("task-clock"), _spec("page-faults")], disabled=False)
    try:
        lost0 = uncharged_ns() or 0
        before, cpu0 = group.read(), _cpu_ns()
        threads = [threading.Thread(target=_burn, args=(15,)) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        touch_small_pages(32).close()
        after, cpu1 = group.read(), _cpu_ns()
        lost1 = uncharged_ns() or 0
    finally:
        group.close()
    task_clock = after.values[0] - before.values[0]
    band = CpuTimeBand(cpu1 - cpu0, lost1 - lost0, windows=1, cpus=cpu_count())
    assert band.holds(task_clock), (task_clock, band)
    assert after.values[1] - before.values[1] >= 1000  # 32 MiB touched page by page
    assert after.running == after.enabled and after.enabled > before.enabled


def test_disabled_group_does_not_count_until_enabled() -> None:
    group = CounterGroup.open([_spec("task-clock")], disabled=True)
    try:
        a = group.read()
        _burn(3)
        b = group.read()
        assert b.values[0] == a.values[0] and b.enabled == a.enabled
        group.enable()
        _burn(3)
        group.disable()
        c = group.read()
        _burn(3)
        d = group.read()
    finally:
        group.close()
    assert c.values[0] > b.values[0] + 1_000_000  # more than 1 ms of hashing
    assert d.values[0] == c.values[0]


def test_open_error_carries_errno_and_is_explained() -> None:
    bogus = EventSpec("bogus", PERF_TYPE_SOFTWARE, 999, source="software")
    with pytest.raises(PerfOpenError) as exc:
        CounterGroup.open([bogus])
    assert exc.value.errno in (errno.ENOENT, errno.EINVAL, errno.EOPNOTSUPP)
    assert exc.value.event == "bogus"
    assert try_open(bogus) == exc.value.errno
    reason, _ = explain(exc.value.errno)
    assert reason


def test_hardware_event_opens_or_is_explained() -> None:
    """On this project's VMs cycles fails with ENOENT; on a host with a PMU it opens."""
    err = try_open(_spec("cycles"))
    if err:
        reason, fix = explain(err)
        assert reason and fix
    else:
        group = CounterGroup.open([_spec("cycles"), _spec("instructions")], disabled=False)
        _burn(2)
        reading = group.read()
        group.close()
        assert reading.values[0] > 0 and reading.values[1] > 0


def test_failed_member_closes_the_group_fds() -> None:
    import os

    before = len(os.listdir("/proc/self/fd"))
    bogus = EventSpec("bogus", PERF_TYPE_SOFTWARE, 999, source="software")
    with pytest.raises(PerfOpenError):
        CounterGroup.open([_spec("task-clock"), bogus])
    assert len(os.listdir("/proc/self/fd")) == before


def test_counted_threads_cpu_leaves_out_threads_that_existed_before() -> None:
    """Only the opener and threads created after count, as with inherit=1; each read is up to date."""
    from hwprof.perf.threadcpu import CountedThreadsCpu

    stop, burnt, release = threading.Event(), threading.Event(), threading.Event()
    later_cpu: list[int] = []

    def spin() -> None:
        while not stop.is_set():
            hashlib.sha256(DATA).digest()

    def work_then_wait() -> None:
        _burn(10)
        later_cpu.append(time.thread_time_ns())
        burnt.set()
        release.wait()

    earlier = threading.Thread(target=spin)
    earlier.start()
    try:
        counted = CountedThreadsCpu()
        assert earlier.native_id in counted.not_counted and threading.get_native_id() not in counted.not_counted
        before, mine = counted.ns(), time.thread_time_ns()
        later = threading.Thread(target=work_then_wait)
        later.start()
        burnt.wait()
        _burn(5)
        own = time.thread_time_ns() - mine
        spent = counted.ns() - before
        release.set()
        later.join()
    finally:
        stop.set()
        earlier.join()
    expected = own + later_cpu[0]
    assert expected * 0.98 < spent < expected + 5_000_000, (spent, own, later_cpu)  # nothing of `earlier`


def test_band_allows_steal_above_and_switches_below() -> None:
    band = CpuTimeBand(1e9, 50e6, windows=1, cpus=2, rel=0.03, switches=1000)
    tick = 2 * 1 * 2 * (1_000_000_000 // os.sysconf("SC_CLK_TCK"))
    assert band.lower == pytest.approx(0.97e9 - 1000 * 10_000)
    assert band.upper == pytest.approx((1e9 + 50e6 + tick) * 1.03)
    assert band.holds(1.04e9) and band.holds(0.965e9) and not band.holds(0.9e9)


def test_a_thread_born_while_a_group_opens_does_not_break_its_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread created between the leader and its siblings inherits a partial group; on Linux >= 6.6
    every read of the group then fails with ECHILD. CounterGroup.open finds that and opens again."""
    from hwprof.perf import syscall

    real = syscall.perf_event_open
    born: list[threading.Thread] = []

    def opening(attr: Any, pid: int, cpu: int, group_fd: int, name: str) -> int:
        fd = real(attr, pid, cpu, group_fd, name)
        if group_fd == -1 and not born:
            born.append(threading.Thread(target=time.sleep, args=(1.0,)))
            born[0].start()
        return fd

    monkeypatch.setattr(syscall, "perf_event_open", opening)
    try:
        partial = CounterGroup._open_once([_spec("task-clock"), _spec("page-faults")], True, False, False, 0, -1)
    except PerfOpenError as exc:
        assert exc.errno == errno.EINVAL  # the sibling refused: the other way a thread born here shows
    else:
        try:
            with pytest.raises(ChildProcessError):
                partial.read()
        finally:
            partial.close()
    for t in born:
        t.join()
    born.clear()
    group = CounterGroup.open([_spec("task-clock"), _spec("page-faults")], disabled=False)
    try:
        assert born, "a thread was born during the first try"
        reading = group.read()
        assert len(reading.values) == 2
    finally:
        group.close()
        for t in born:
            t.join()
