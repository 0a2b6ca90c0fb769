"""valgrind client requests from Python, without a C extension.

valgrind recognises a client request by a magic instruction sequence (valgrind.h, amd64: four
`rol rdi` that rotate it by 128 bits in all, then `xchg rbx, rbx`, with the address of the
request block in rax and the default result in rdx). This module writes that sequence into one
executable page and calls it through ctypes. Outside valgrind the sequence does nothing and the
call returns the default, so it is safe to call anywhere. (A `--dump-before=FN` on a ctypes-called
function never fired: callgrind books the call inside libffi; the client request does not care.)
"""

from __future__ import annotations

import ctypes
import mmap
import platform
from functools import cache
from typing import Any

RUNNING_ON_VALGRIND = 0x1001
CALLGRIND_BASE = 0x43540000  # VG_USERREQ_TOOL_BASE('C', 'T')
DUMP_STATS = CALLGRIND_BASE + 0
ZERO_STATS = CALLGRIND_BASE + 1
TOGGLE_COLLECT = CALLGRIND_BASE + 2
DUMP_STATS_AT = CALLGRIND_BASE + 3
START_INSTRUMENTATION = CALLGRIND_BASE + 4
STOP_INSTRUMENTATION = CALLGRIND_BASE + 5

# uint64 request(uint64 *block /* rdi */, uint64 default /* rsi */)
_CODE = bytes.fromhex(
    "4889f8"  # mov rax, rdi       request block
    "4889f2"  # mov rdx, rsi       default result
    "48c1c703"  # rol rdi, 3
    "48c1c70d"  # rol rdi, 13
    "48c1c73d"  # rol rdi, 61
    "48c1c733"  # rol rdi, 51
    "4887db"  # xchg rbx, rbx      the request
    "4889d0"  # mov rax, rdx       result
    "c3"  # ret
)
_Request = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64), ctypes.c_uint64)


class ClientRequestsUnavailable(RuntimeError):
    pass


@cache
def _entry() -> tuple[mmap.mmap, Any]:
    if platform.machine() not in ("x86_64", "AMD64"):
        raise ClientRequestsUnavailable(f"client requests are written for amd64, not {platform.machine()}")
    page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(_CODE)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    return page, _Request(address)


def request(code: int, *args: int, default: int = 0) -> int:
    """One client request (up to five word arguments); returns valgrind's answer or the default."""
    block = (ctypes.c_uint64 * 6)(code, *(list(args) + [0] * (5 - len(args))))
    return int(_entry()[1](block, default))


def running_on_valgrind() -> int:
    """How many valgrinds deep this process runs (0 outside valgrind)."""
    return request(RUNNING_ON_VALGRIND)


def dump_stats_at(label: str) -> None:
    """callgrind: dump the counts since the last dump as one part named `label`, and zero them."""
    text = ctypes.create_string_buffer(label.encode())
    request(DUMP_STATS_AT, ctypes.addressof(text))


def zero_stats() -> None:
    request(ZERO_STATS)


def start_instrumentation() -> None:
    request(START_INSTRUMENTATION)


def stop_instrumentation() -> None:
    request(STOP_INSTRUMENTATION)
