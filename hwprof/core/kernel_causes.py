"""Why a thread was in the kernel: the cause a kernel-space sample's callchain shows.

A sample taken in kernel space names the function it was in (its leaf: `_raw_spin_lock`,
`charge_memcg`, `clear_page_erms`), which says little about why the thread entered the kernel. The
callchain does: its kernel frames end at the entry the thread came in by. Read from the leaf
outwards, the first frame that is an entry decides (an interrupt taken inside a syscall is the
interrupt's cost):

- page faults: asm_exc_page_fault / exc_page_fault / do_user_addr_fault; the part is what the fault
  did (memcg charge, page zeroing, page allocation), read from the innermost frame that says it;
- IPIs: an inter-processor interrupt received (asm_sysvec_call_function*) or sent and waited for
  (smp_call_function*, flush_tlb*: TLB shootdowns, e.g. by munmap while other threads run);
- interrupts: any other sysvec_* / common_interrupt entry (timers, devices);
- syscalls: entry_SYSCALL_64 / do_syscall_64, the part is the syscall's name (__x64_sys_futex -> futex);
- other: none of these (kernel threads' own work, signal return, an entry this list does not know).

Without a callchain (perf.data recorded without -g) the cause is guessed from the leaf's name
alone, as before callchains were recorded, and marked `by_leaf` so the report says so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

CAUSE_FAULT = "page faults"
CAUSE_SYSCALL = "syscalls"
CAUSE_IPI = "IPIs"
CAUSE_INTERRUPT = "interrupts"
CAUSE_OTHER = "other"
CAUSES = (CAUSE_FAULT, CAUSE_SYSCALL, CAUSE_IPI, CAUSE_INTERRUPT, CAUSE_OTHER)

TOPICS = {
    CAUSE_FAULT: "kernel-faults",
    CAUSE_SYSCALL: "kernel-syscalls",
    CAUSE_IPI: "kernel-ipi",
    CAUSE_INTERRUPT: "kernel-other",
    CAUSE_OTHER: "kernel-other",
}
"""The finding topic of a kernel share by its cause (analysis/advice/candidates.py keys on it)."""

FAULT_ENTRY = re.compile(r"^(asm_)?exc_page_fault$|^do_user_addr_fault$|^do_page_fault$")
IPI_ENTRY = re.compile(
    r"^(asm_)?sysvec_(call_function|reschedule_ipi)|^smp_call_function|^(native_)?flush_tlb_multi"
    r"|^flush_tlb_mm_range|^arch_tlbbatch_flush|^try_to_unmap_flush"
)
INTERRUPT_ENTRY = re.compile(r"^(asm_)?(sysvec_|common_interrupt|spurious_interrupt)|^irq_exit")
SYSCALL_ENTRY = re.compile(r"^entry_SYSCALL|^do_syscall_64$|^__x64_sys_|^__do_sys_|^__se_sys_|^ksys_|^x64_sys_call$")
SYSCALL_NAME = re.compile(r"^(?:__x64_sys|__do_sys|__se_sys|ksys)_(\w+)$")
SYSCALL_DISPATCH = frozenset({"do_syscall_64", "x64_sys_call", "entry_SYSCALL_64", "entry_SYSCALL_64_after_hwframe"})

FAULT_PARTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"memcg|mem_cgroup"), "memcg charge"),
    (re.compile(r"^clear_page|^clear_huge_page|^folio_zero|^clear_user|zero_user"), "page zeroing"),
    (re.compile(r"^get_page_from_freelist|rmqueue|alloc_pages|^__alloc_frozen_pages|alloc_folio"), "page allocation"),
    (re.compile(r"lru|^folio_add_new_anon"), "LRU lists"),
)
"""What a fault spent its time on, by the innermost frame naming it (a lock inside the memcg charge
is the charge's)."""

LEAF_FAULT = re.compile(
    r"clear_page|page_fault|do_anonymous_page|handle_mm_fault|get_page_from_freelist|zap_pte|memcg|mem_cgroup"
)
LEAF_SYSCALL = re.compile(r"^(__x64_sys|__do_sys|ksys|do_syscall|entry_SYSCALL)|futex")


@dataclass(frozen=True, slots=True)
class KernelCause:
    cause: str
    """One of CAUSES."""
    part: str
    """Within the cause: the syscall, what a fault did, the interrupt."""
    by_leaf: bool = False
    """Guessed from the leaf symbol alone: no callchain was recorded."""


def _fault_part(frames: Sequence[str], upto: int) -> str:
    for frame in frames[:upto]:
        for pattern, part in FAULT_PARTS:
            if pattern.search(frame):
                return part
    return frames[0] if upto else "the fault's entry"


def _syscall_part(frames: Sequence[str], at: int) -> str:
    for frame in frames[at:]:
        match = SYSCALL_NAME.match(frame)
        if match:
            return match[1].removeprefix("sys_")
    inner = [f for f in frames[:at] if f not in SYSCALL_DISPATCH]
    return inner[-1] if inner else "syscall entry"


@lru_cache(maxsize=65536)
def cause_of_chain(frames: tuple[str, ...]) -> KernelCause:
    """The cause of a kernel sample from its kernel frames, leaf first."""
    for i, frame in enumerate(frames):
        if FAULT_ENTRY.match(frame):
            return KernelCause(CAUSE_FAULT, _fault_part(frames, i))
        if IPI_ENTRY.search(frame):
            if any("tlb" in f for f in frames):
                return KernelCause(CAUSE_IPI, "TLB shootdown")
            return KernelCause(CAUSE_IPI, "cross-CPU call" if "call_function" in frame else frame.removeprefix("asm_"))
        if INTERRUPT_ENTRY.match(frame):
            return KernelCause(CAUSE_INTERRUPT, frame.removeprefix("asm_"))
        if SYSCALL_ENTRY.match(frame):
            return KernelCause(CAUSE_SYSCALL, _syscall_part(frames, i))
    return KernelCause(CAUSE_OTHER, frames[-1] if frames else "[kernel]")


@lru_cache(maxsize=4096)
def cause_of_leaf(sym: str) -> KernelCause:
    """The cause guessed from the leaf symbol alone (no callchain): page-fault work by its name, a
    syscall by its entry's, everything else other."""
    if LEAF_FAULT.search(sym):
        return KernelCause(CAUSE_FAULT, _fault_part((sym,), 1), by_leaf=True)
    if LEAF_SYSCALL.search(sym):
        match = SYSCALL_NAME.match(sym)
        return KernelCause(CAUSE_SYSCALL, match[1] if match else sym, by_leaf=True)
    if INTERRUPT_ENTRY.match(sym):
        return KernelCause(CAUSE_INTERRUPT, sym, by_leaf=True)
    return KernelCause(CAUSE_OTHER, sym, by_leaf=True)


@dataclass
class NativeCause:
    """One cause of the kernel-space time of a layer (or of forward) as the report reads it: its share of
    the layer's sampled time, and its heaviest parts with theirs."""

    cause: str
    share: float
    samples: int
    parts: list[tuple[str, float]] = field(default_factory=list)


def causes_by_leaf(kernels: Iterable[tuple[str, float, int]], kernel_share: float, samples: int) -> list[NativeCause]:
    """A kernels file written before causes were stored: its kernel-space rows (name, share, samples: the
    table's top kernels) charged by their names; kernel time outside them is "other"."""
    by: dict[str, NativeCause] = {}
    for name, share, n in kernels:
        cause = cause_of_leaf(name)
        row = by.setdefault(cause.cause, NativeCause(cause.cause, 0.0, 0))
        row.share += share
        row.samples += n
        row.parts.append((cause.part, share))
    rest = kernel_share - sum(c.share for c in by.values())
    if rest > 1e-9:
        row = by.setdefault(CAUSE_OTHER, NativeCause(CAUSE_OTHER, 0.0, 0))
        row.share += rest
        row.samples += round(rest * samples)
        row.parts.append(("(kernel functions outside the top kernels)", rest))
    return sorted(by.values(), key=lambda c: -c.share)
