"""`perf script` text as samples, and what code a sample's instruction pointer was in.

The perf sampling collector runs `perf script -F comm,tid,cpu,time,event,period,ip,sym,dso --ns`
(SCRIPT_FIELDS) on its perf.data (recorded with --sample-cpu). A line reads

    python  2460 [001]   337.512430117:     250000 cpu-clock:      7f230ef8a1c4 jit_avx512_..._t.0 (/tmp/perf-2453.map)

(without the CPU, `[001]`, where perf.data has none: recordings made without --sample-cpu).

Callchains. Where perf.data holds callchains (perf record --call-graph fp), the line ends at the
event and the frames follow, leaf first, one a line, then a blank line:

    python  9393 [000]   399.281896913:    1001001 cpu-clock:
    \tffffffff81692498 charge_memcg ([kernel.kallsyms])
    \tffffffff821f51c6 exc_page_fault ([kernel.kallsyms])
    \t           98109 _int_malloc (/usr/lib/x86_64-linux-gnu/libc.so.6)

The first frame is the sample's own ip, sym and dso (the leaf, which the tables charge as without
callchains); the kernel-space frames are kept (Sample.kernel_chain) for the cause of a kernel
sample (hwprof.core.kernel_causes). User frames are dropped: torch is built without frame
pointers, so past the first few they are not reliable, and the causes need only the kernel's.

With leader sampling of an event group (`-e '{cycles,instructions,cache-misses}:S'`), perf
records the group's counts at every sample of the leader and `perf script` prints one line per
member, each with the same tid, time and ip and the member's count since the previous sample as
its period: consecutive lines with the same (tid, time, ip) are one sample with a count per event.

Kernel names. Symbols come from the DSOs' symbol tables (libtorch_cpu is not stripped), oneDNN's
JIT kernels from the /tmp/perf-PID.map oneDNN writes when ONEDNN_JIT_PROFILE=2 (perf appends
".N" to a kernel generated N-th: dropped, so one kernel of one kind is one name), kernel-space
samples from kallsyms. The OpenMP runtime shipped in the torch wheel (libgomp) has no symbols:
its samples are time a thread spent in the runtime rather than in a parallel region's body, i.e.
waiting at a barrier, spinning for work or forking; they are labelled as such.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import PurePath

from hwprof.core.cppnames import elide_cpp
from hwprof.core.kernels import (
    KIND_ATEN,
    KIND_BLAS,
    KIND_CODEC,
    KIND_JIT,
    KIND_KERNEL,
    KIND_ONEDNN,
    KIND_OPENCV,
    KIND_OPENMP,
    KIND_OTHER,
    KIND_PYTHON,
)

SCRIPT_FIELDS = "comm,tid,cpu,time,event,period,ip,sym,dso"
SCRIPT_FIELDS_NO_CPU = SCRIPT_FIELDS.replace("cpu,", "")
"""For a perf.data recorded without the CPU of each sample (perf script refuses the cpu field there)."""
LINE = re.compile(
    r"^\s*(?P<comm>.*?)\s+(?P<tid>\d+)\s+(?:\[(?P<cpu>\d+)\]\s+)?(?P<time>\d+\.\d+):\s+"
    r"(?P<period>\d+)\s+(?P<event>\S+):\s*(?:(?P<ip>[0-9a-f]+)\s+(?P<rest>.*))?$"
)
FRAME = re.compile(r"^\t\s*(?P<ip>[0-9a-f]+)\s+(?P<rest>.*)$")
"""A callchain frame: a tab, then the address right-aligned, then "sym (dso)"."""
KERNEL_SPACE = 0xFFFF800000000000
JIT_SUFFIX = re.compile(r"\.\d+$")
ATEN_FUNCTION = re.compile(r"at::native::(?:\(anonymous namespace\)::)?(?:\w+::)*?(\w+)[<(]")
ATEN_LOOPS = frozenset({"VectorizedLoop2d", "vectorized_loop", "basic_loop", "cpu_kernel_vec", "cpu_serial_kernel"})
"""aten's generic loop templates: the operation is the function inside them (silu_kernel, add_kernel ...)."""
OPENMP_DSOS = ("libgomp", "libiomp", "libomp")
CODEC_DSOS = ("libavcodec", "libavformat", "libavutil", "libswscale", "libswresample", "libvpx", "libaom", "libdav1d")
"""FFmpeg's libraries and the codecs they call, as the opencv-python wheel bundles them."""
OPENCV_DSOS = ("cv2", "libopencv")
WHEEL_HASH = re.compile(r"-[0-9a-f]{8}$")
"""auditwheel's suffix on a library a wheel bundles (libavcodec-c4204469.so.62): the same library in every build."""

OPENMP_LABEL = "[OpenMP runtime: wait/spin/fork]"
"""libgomp samples: the torch wheel's libgomp has no symbols, so only its library is known."""


@dataclass(slots=True)
class Sample:
    tid: int
    t_ns: int
    """CLOCK_MONOTONIC ns (perf record -k CLOCK_MONOTONIC)."""
    ip: int
    sym: str
    dso: str
    comm: str
    period: int
    """Of the sampling event (ns for cpu-clock, cycles for cycles)."""
    event: str
    counts: dict[str, int] = field(default_factory=dict)
    """Group members' counts since the thread's previous sample (leader sampling); empty otherwise."""
    cpu: int | None = None
    """The CPU the sample was taken on, where perf recorded it."""
    kernel_chain: tuple[str, ...] | None = None
    """The kernel-space frames of its callchain, leaf first (empty for a sample in user space); None
    where perf recorded no callchain."""


def _time_ns(text: str) -> int:
    seconds, _, frac = text.partition(".")
    return int(seconds) * 1_000_000_000 + int(frac.ljust(9, "0")[:9])


def _split_rest(rest: str) -> tuple[str, str]:
    """ "sym (dso)" -> (sym, dso); the symbol may hold parentheses itself, the dso is the last group."""
    rest = rest.rstrip()
    if rest.endswith(")"):
        cut = rest.rfind(" (")
        if cut >= 0:
            return rest[:cut].strip(), rest[cut + 2 : -1]
        if rest.startswith("("):
            return "[unknown]", rest[1:-1]
    return rest.strip() or "[unknown]", ""


def _is_kernel(ip: int, dso: str) -> bool:
    return dso.startswith("[kernel") or ip >= KERNEL_SPACE


def parse_script(lines: Iterable[str]) -> Iterator[Sample]:
    """Samples of `perf script -F SCRIPT_FIELDS --ns` output, group members merged into one sample,
    with the kernel part of each callchain where perf.data has callchains."""
    pending: Sample | None = None
    current: Sample | None = None
    """The sample whose callchain lines are being read (its leaf comes from the first frame)."""
    frames: list[str] = []

    def done() -> Sample | None:
        """Close `current`: merged into `pending` as a group member's count, or the new pending one."""
        nonlocal pending, current
        if current is None:
            return None
        if current.kernel_chain is not None:
            current.kernel_chain = tuple(frames)
        s, current = current, None
        same = pending is not None and (pending.tid, pending.t_ns, pending.ip) == (s.tid, s.t_ns, s.ip)
        if same and pending is not None and s.event not in pending.counts:
            pending.counts[s.event] = s.period
            return None
        out, pending = pending, s
        return out

    leaf = True
    """The next frame is the sample's leaf."""
    in_kernel = True
    """No user frame seen yet in this callchain: kernel frames are still the kernel part."""
    for line in lines:
        if current is not None and current.kernel_chain is not None:
            frame = FRAME.match(line)
            if frame is not None:
                ip = int(frame["ip"], 16)
                sym, dso = _split_rest(frame["rest"])
                if leaf:
                    current.ip, current.sym, current.dso, leaf = ip, sym, dso, False
                in_kernel = in_kernel and _is_kernel(ip, dso)
                if in_kernel:
                    frames.append(sys.intern(sym))
                continue
        match = LINE.match(line)
        if match is None:
            continue
        out = done()
        if out is not None:
            yield out
        frames, leaf, in_kernel = [], True, True
        tid, t_ns, period, event = int(match["tid"]), _time_ns(match["time"]), int(match["period"]), match["event"]
        cpu = int(match["cpu"]) if match["cpu"] is not None else None
        comm = match["comm"].strip()
        if match["ip"] is None:
            current = Sample(tid, t_ns, 0, "[unknown]", "", comm, period, event, {event: period}, cpu, ())
        else:
            sym, dso = _split_rest(match["rest"])
            current = Sample(tid, t_ns, int(match["ip"], 16), sym, dso, comm, period, event, {event: period}, cpu)
    out = done()
    if out is not None:
        yield out
    if pending is not None:
        yield pending


def finish_counts(samples: list[Sample]) -> list[str]:
    """Drop the counts of samples that carry only their own event; return the group's event names."""
    events: list[str] = []
    for s in samples:
        if len(s.counts) > 1:
            for name in s.counts:
                if name not in events:
                    events.append(name)
    if not events:
        for s in samples:
            s.counts = {}
    return events


@dataclass(frozen=True, slots=True)
class Code:
    """What code a sample ran: a kernel name, its kind and its library."""

    name: str
    kind: str
    library: str


def library_name(dso: str) -> str:
    if not dso:
        return "[unknown]"
    if dso.startswith("["):
        return dso
    name = PurePath(dso).name
    if name.startswith("perf-") and name.endswith(".map"):
        return "[JIT perf map]"
    return WHEEL_HASH.sub("", re.sub(r"\.so(\.[\d.]+)?$", "", name))


@lru_cache(maxsize=65536)
def classify(sym: str, dso: str, ip: int = 0) -> Code:
    library = library_name(dso)
    if _is_kernel(ip, dso):
        return Code(sym if sym != "[unknown]" else "[kernel]", KIND_KERNEL, "[kernel]")
    if library == "[JIT perf map]" or dso.startswith("[JIT]") or sym.startswith("jit_"):
        return Code(JIT_SUFFIX.sub("", sym), KIND_JIT, "oneDNN JIT")
    if any(library.startswith(d) for d in OPENMP_DSOS):
        return Code(OPENMP_LABEL if sym == "[unknown]" else sym, KIND_OPENMP, library)
    if any(library.startswith(d) for d in CODEC_DSOS):
        return Code(f"[{library}]" if sym == "[unknown]" else sym, KIND_CODEC, library)
    if any(library.startswith(d) for d in OPENCV_DSOS):
        return Code(f"[{library}]" if sym == "[unknown]" else short_name(sym), KIND_OPENCV, library)
    if sym == "[unknown]":
        where = library if library != "[unknown]" else "anonymous memory (JIT code without a perf map)"
        return Code(f"[unknown in {where}]", KIND_OTHER, library)
    if sym.startswith("mkl_"):
        return Code(sym, KIND_BLAS, library)
    if "dnnl::" in sym:
        return Code(short_name(sym), KIND_ONEDNN, library)
    if "at::" in sym or "c10::" in sym:
        return Code(short_name(sym), KIND_ATEN, library)
    if library.startswith("libpython") or library.startswith("python"):
        return Code(sym, KIND_PYTHON, library)
    return Code(short_name(sym), KIND_OTHER, library)


def short_name(sym: str) -> str:
    """A readable kernel name of a demangled C++ symbol.

    aten's parallel regions are lambdas inside templates
    (`at::internal::invoke_parallel<at::parallel_for<at::native::(anonymous namespace)::cpu_max_pool<...>...`):
    they are named by the aten function inside, "at::native::cpu_max_pool [parallel body]", and
    a generic loop by the operation it runs, "at::native::silu_kernel [VectorizedLoop2d]".
    Otherwise template arguments and parameter lists are elided as <…> and (…).
    """
    if "invoke_parallel" in sym or "parallel_for<" in sym or "{lambda" in sym:
        found = list(dict.fromkeys(ATEN_FUNCTION.findall(sym)))
        if found:
            chosen = next((f for f in found if f not in ATEN_LOOPS), found[0])
            where = "parallel body" if "invoke_parallel" in sym or "parallel_for<" in sym else found[0]
            return f"at::native::{chosen} [{where}]" if where != chosen else f"at::native::{chosen}"
    return elide_cpp(sym.replace("(anonymous namespace)::", ""))
