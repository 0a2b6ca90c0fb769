"""perf_event_open(2) through ctypes, and counter groups read in one read(2).

No maintained Python library opens perf events, so this is the small part written by hand:
the attribute struct (PERF_ATTR_SIZE_VER5, 112 bytes), the syscall, the three ioctls used, and
the group read format `{nr, time_enabled, time_running, {value, id} * nr}`.

Every group is opened with PERF_FORMAT_GROUP | ID | TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING, even
a group of one, so there is one parser. With `inherit=1` a read on the parent fd returns the sum
over the opening thread and every thread created after the open (the kernel folds in the
inherited child events), which is what counts torch's intra-op pool.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import platform
import struct
import time
from dataclasses import dataclass
from typing import Protocol

PERF_TYPE_HARDWARE = 0
PERF_TYPE_SOFTWARE = 1
PERF_TYPE_TRACEPOINT = 2
PERF_TYPE_HW_CACHE = 3
PERF_TYPE_RAW = 4

FORMAT_TOTAL_TIME_ENABLED = 1 << 0
FORMAT_TOTAL_TIME_RUNNING = 1 << 1
FORMAT_ID = 1 << 2
FORMAT_GROUP = 1 << 3
READ_FORMAT = FORMAT_TOTAL_TIME_ENABLED | FORMAT_TOTAL_TIME_RUNNING | FORMAT_ID | FORMAT_GROUP

FLAG_DISABLED = 1 << 0
FLAG_INHERIT = 1 << 1
FLAG_EXCLUDE_KERNEL = 1 << 5
FLAG_EXCLUDE_HV = 1 << 6

PERF_FLAG_FD_CLOEXEC = 1 << 3

IOC_ENABLE = 0x2400
IOC_DISABLE = 0x2401
IOC_RESET = 0x2403
IOC_ID = 0x80082407
IOC_FLAG_GROUP = 1

_SYSCALL_NR = {
    "x86_64": 298,
    "amd64": 298,
    "i386": 336,
    "i686": 336,
    "aarch64": 241,
    "arm64": 241,
    "riscv64": 241,
    "armv7l": 364,
    "ppc64le": 319,
    "ppc64": 319,
    "s390x": 331,
}

_HEADER = struct.Struct("<3Q")
_ENTRY = struct.Struct("<2Q")


class PerfEventAttr(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64),
        ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),
        ("wakeup_events", ctypes.c_uint32),
        ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64),
        ("config2", ctypes.c_uint64),
        ("branch_sample_type", ctypes.c_uint64),
        ("sample_regs_user", ctypes.c_uint64),
        ("sample_stack_user", ctypes.c_uint32),
        ("clockid", ctypes.c_int32),
        ("sample_regs_intr", ctypes.c_uint64),
        ("aux_watermark", ctypes.c_uint32),
        ("sample_max_stack", ctypes.c_uint16),
        ("reserved_2", ctypes.c_uint16),
    ]


assert ctypes.sizeof(PerfEventAttr) == 112


class Encoded(Protocol):
    """What perf_event_open needs of an event (events.EventSpec satisfies it)."""

    @property
    def name(self) -> str: ...
    @property
    def type(self) -> int: ...
    @property
    def config(self) -> int: ...
    @property
    def config1(self) -> int: ...
    @property
    def config2(self) -> int: ...


class PerfOpenError(OSError):
    """perf_event_open failed for one event; errno says why (see errors.explain)."""

    def __init__(self, err: int, event: str) -> None:
        super().__init__(err, f"perf_event_open({event}): {os.strerror(err)}")
        self.event = event


_libc: ctypes.CDLL | None = None


def _syscall_nr() -> int:
    machine = platform.machine().lower()
    if machine not in _SYSCALL_NR:
        raise OSError(95, f"perf_event_open: unknown syscall number on {machine}")
    return _SYSCALL_NR[machine]


def _lib() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        _libc = libc
    return _libc


def make_attr(event: Encoded, *, disabled: bool, inherit: bool, exclude_kernel: bool = False) -> PerfEventAttr:
    attr = PerfEventAttr()
    attr.type = event.type
    attr.size = ctypes.sizeof(PerfEventAttr)
    attr.config = event.config
    attr.config1 = event.config1
    attr.config2 = event.config2
    attr.read_format = READ_FORMAT
    flags = 0
    if disabled:
        flags |= FLAG_DISABLED
    if inherit:
        flags |= FLAG_INHERIT
    if exclude_kernel:
        flags |= FLAG_EXCLUDE_KERNEL | FLAG_EXCLUDE_HV
    attr.flags = flags
    return attr


def perf_event_open(attr: PerfEventAttr, pid: int = 0, cpu: int = -1, group_fd: int = -1, name: str = "") -> int:
    """The raw syscall; returns an fd or raises PerfOpenError with the errno."""
    fd = _lib().syscall(
        ctypes.c_long(_syscall_nr()),
        ctypes.byref(attr),
        ctypes.c_int(pid),
        ctypes.c_int(cpu),
        ctypes.c_int(group_fd),
        ctypes.c_ulong(PERF_FLAG_FD_CLOEXEC),
    )
    if fd < 0:
        raise PerfOpenError(ctypes.get_errno(), name or f"type={attr.type},config={attr.config:#x}")
    return int(fd)


@dataclass(frozen=True, slots=True)
class GroupReading:
    """One read of a group: raw values in member order, and the group's enabled/running ns."""

    enabled: int
    running: int
    values: tuple[int, ...]


def parse_group(raw: bytes, order: dict[int, int] | None = None) -> GroupReading:
    """Parse a PERF_FORMAT_GROUP|ID|TOTAL_TIME_* read; `order` maps event id -> member index."""
    nr, enabled, running = _HEADER.unpack_from(raw, 0)
    entries = [_ENTRY.unpack_from(raw, _HEADER.size + k * _ENTRY.size) for k in range(nr)]
    if order is None:
        return GroupReading(enabled, running, tuple(v for v, _ in entries))
    values = [0] * len(order)
    for value, event_id in entries:
        values[order[event_id]] = value
    return GroupReading(enabled, running, tuple(values))


CLONE_SETTLE_S = 0.002
GROUP_OPEN_TRIES = 5


class CounterGroup:
    """Events opened as one perf group (the first is the leader): scheduled and read together."""

    def __init__(self, names: list[str], fds: list[int], ids: list[int]) -> None:
        self.names = names
        self.fds = fds
        self.ids = ids
        self.leader = fds[0]
        self.read_size = _HEADER.size + _ENTRY.size * len(fds)
        self._order = {event_id: k for k, event_id in enumerate(ids)}

    @classmethod
    def open(
        cls,
        events: list[Encoded],
        *,
        inherit: bool = True,
        disabled: bool = True,
        exclude_kernel: bool = False,
        pid: int = 0,
        cpu: int = -1,
    ) -> CounterGroup:
        """Open every event into one group, or raise PerfOpenError naming the event that failed.

        A thread created while the group is being opened inherits the part opened so far, and from
        Linux 6.6 on every read() of the group then fails with ECHILD ("perf: Disallow mis-matched
        inherited group reads"): seen here in about one in four full test runs, when another thread
        of the process started a thread at that moment. The group is read once right after opening
        to find that, and opened again (the partial child events stay with the closed group). A
        sibling refused with EINVAL is tried again too (seen once, with a thread born after the
        leader); an event that is really invalid fails the same way on the last try.
        """
        for _ in range(GROUP_OPEN_TRIES - 1):
            try:
                group = cls._open_once(events, inherit, disabled, exclude_kernel, pid, cpu)
            except PerfOpenError as exc:
                if exc.errno != errno.EINVAL or len(events) < 2:
                    raise
                continue  # a sibling refused while a thread was being born: seen in full test runs
            if inherit:
                # A clone() that began during the open attaches its partial child events when it
                # completes, which can be after a read made at once (a CI run saw the first ECHILD
                # only at a later read): give it a moment before the check.
                time.sleep(CLONE_SETTLE_S)
            try:
                group.read_raw()
            except ChildProcessError:
                group.close()
                continue
            return group
        return cls._open_once(events, inherit, disabled, exclude_kernel, pid, cpu)

    @classmethod
    def _open_once(
        cls, events: list[Encoded], inherit: bool, disabled: bool, exclude_kernel: bool, pid: int, cpu: int
    ) -> CounterGroup:
        fds: list[int] = []
        try:
            for k, event in enumerate(events):
                attr = make_attr(event, disabled=disabled and k == 0, inherit=inherit, exclude_kernel=exclude_kernel)
                fds.append(perf_event_open(attr, pid, cpu, fds[0] if fds else -1, event.name))
            ids = [event_id(fd) for fd in fds]
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        return cls([e.name for e in events], fds, ids)

    def read_raw(self) -> bytes:
        return os.read(self.leader, self.read_size)

    def parse(self, raw: bytes) -> GroupReading:
        return parse_group(raw, self._order)

    def read(self) -> GroupReading:
        return self.parse(self.read_raw())

    def enable(self) -> None:
        fcntl.ioctl(self.leader, IOC_ENABLE, IOC_FLAG_GROUP)

    def disable(self) -> None:
        fcntl.ioctl(self.leader, IOC_DISABLE, IOC_FLAG_GROUP)

    def reset(self) -> None:
        fcntl.ioctl(self.leader, IOC_RESET, IOC_FLAG_GROUP)

    def close(self) -> None:
        for fd in reversed(self.fds):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []


def event_id(fd: int) -> int:
    buf = bytearray(8)
    fcntl.ioctl(fd, IOC_ID, buf)
    return int(struct.unpack("<Q", bytes(buf))[0])


def try_open(event: Encoded, exclude_kernel: bool = False) -> int:
    """0 if the event opens on this host for this thread, else the errno (the fd is closed)."""
    try:
        fd = perf_event_open(make_attr(event, disabled=True, inherit=False, exclude_kernel=exclude_kernel))
    except PerfOpenError as exc:
        return exc.errno or 0
    os.close(fd)
    return 0
