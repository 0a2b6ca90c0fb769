"""CPU samples in the trace as Perfetto's own perf samples: one packet per sample, at its instant.

Perfetto represents sampled callstacks as `perf_sample` packets (pid, tid, cpu, callstack_iid) on a
packet sequence whose interned data holds the function names, mappings (a library each), frames and
callstacks. The trace processor loads them into its `perf_sample` table, on the same threads as the
track-event slices of those tids; the UI draws each thread's samples on a "<thread> Callstacks"
track beside its slices and sums any area selection over them into a "Perf Sample Flamegraph".
A sample is an instant there, so the layer whose time range holds it is the layer it is drawn in,
as the kernel tables charge it.

The samples go on a sequence of their own (interned state is per sequence), with CLOCK_MONOTONIC
timestamps: the run's clock, which the events' sequence makes the trace's clock.

The trace processor (v52; later versions only where a sample sets it) also puts every perf sample's
`timebase_count` on a counter track per CPU, named by the sequence's perf sample defaults, and reads
an unset count as 0: a "cpu-clock" track of zeros that nothing measured. So every sample carries a
count that the records hold, named for what it is (`timebase`): where each sample has perf's period
(the sampling event's count since its thread's previous sample), the sum of the periods of the
samples taken on that CPU so far, named "<event>: sum of sample periods"; in records that have no
period (written before it was kept), the number of samples taken on that CPU so far, named
"perf samples (count)".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from hwprof.trace.model import CallstackSample, PassTimeline

SAMPLES_SEQUENCE_ID = 3
CLOCK_MONOTONIC = 3
"""perfetto.protos.BuiltinClock.BUILTIN_CLOCK_MONOTONIC."""


class PacketSource(Protocol):
    pb: Any

    def packet(self, sequence: int = ...) -> Any: ...


class CallstackInterner:
    """(function, library) frames and root-first stacks -> iids; new entries ride on the next packet.

    A frame is its function in its mapping (library); its rel_pc is left unset (0): the samples'
    instruction offsets differ within one function, and the flamegraph groups by function. The trace
    processor keeps frames of one mapping with rel_pc 0 apart by their names (checked with UI v52)."""

    def __init__(self) -> None:
        self.names: dict[str, int] = {}
        self.paths: dict[str, int] = {}
        self.mappings: dict[str, int] = {}
        self.frames: dict[tuple[str, str], int] = {}
        self.callstacks: dict[tuple[tuple[str, str], ...], int] = {}
        self._pending: list[tuple[str, Any]] = []

    def callstack(self, frames: tuple[tuple[str, str], ...]) -> int:
        iid = self.callstacks.get(frames)
        if iid is None:
            frame_ids = [self._frame(f) for f in frames]
            iid = self.callstacks[frames] = len(self.callstacks) + 1
            self._pending.append(("callstacks", (iid, frame_ids)))
        return iid

    def _frame(self, frame: tuple[str, str]) -> int:
        iid = self.frames.get(frame)
        if iid is None:
            function, library = frame
            name_id = self._string("function_names", self.names, function)
            mapping_id = self._mapping(library)
            iid = self.frames[frame] = len(self.frames) + 1
            self._pending.append(("frames", (iid, name_id, mapping_id)))
        return iid

    def _mapping(self, library: str) -> int:
        iid = self.mappings.get(library)
        if iid is None:
            path_id = self._string("mapping_paths", self.paths, library)
            iid = self.mappings[library] = len(self.mappings) + 1
            self._pending.append(("mappings", (iid, path_id)))
        return iid

    def _string(self, kind: str, table: dict[str, int], text: str) -> int:
        iid = table.get(text)
        if iid is None:
            iid = table[text] = len(table) + 1
            self._pending.append((kind, (iid, text)))
        return iid

    def flush(self, packet: Any) -> None:
        data = packet.interned_data
        for kind, entry in self._pending:
            if kind in ("function_names", "mapping_paths"):
                item = getattr(data, kind).add()
                item.iid, item.str = entry[0], entry[1].encode()
            elif kind == "mappings":
                mapping = data.mappings.add()
                mapping.iid = entry[0]
                mapping.path_string_ids.append(entry[1])
            elif kind == "frames":
                frame = data.frames.add()
                frame.iid, frame.function_name_id, frame.mapping_id = entry
            else:
                callstack = data.callstacks.add()
                callstack.iid = entry[0]
                callstack.frame_ids.extend(entry[1])
        self._pending.clear()


COUNT_NAME = "perf samples (count)"


@dataclass(frozen=True)
class Timebase:
    """What each sample's timebase count holds: its name (the trace processor's counter track per CPU)
    and whether it sums the recorded periods (else it counts the samples)."""

    name: str
    periods: bool

    @classmethod
    def of(cls, samples: Iterable[CallstackSample], event: str | None) -> Timebase:
        if all(s.period is not None for s in samples):
            return cls(f"{event or 'sampling event'}: sum of sample periods", True)
        return cls(COUNT_NAME, False)


def timebase_counts(samples: Iterable[CallstackSample], periods: bool) -> list[int]:
    """Per sample, in order: the sum over the samples taken on its CPU up to it (itself included) of
    their periods, or of 1 each. A sample with no CPU counts on CPU 0, where Perfetto puts it."""
    totals: dict[int, int] = {}
    out = []
    for s in samples:
        cpu = s.cpu or 0
        totals[cpu] = totals.get(cpu, 0) + (int(s.period or 0) if periods else 1)
        out.append(totals[cpu])
    return out


def write_samples(w: PacketSource, passes: Iterable[PassTimeline], event: str | None = None) -> int:
    """Every pass's samples as perf_sample packets on their own sequence; returns how many.
    `event`: the perf event the samples were taken on (run.json's perf_sampling summary)."""
    flags = w.pb.TracePacket
    passes = [ptl for ptl in passes if ptl.samples]
    if not passes:
        return 0
    timebase = Timebase.of((s for ptl in passes for s in ptl.samples), event)
    first = w.packet(SAMPLES_SEQUENCE_ID)
    first.sequence_flags = flags.SEQ_INCREMENTAL_STATE_CLEARED
    first.trace_packet_defaults.perf_sample_defaults.timebase.name = timebase.name
    interner = CallstackInterner()
    counts = iter(timebase_counts((s for ptl in passes for s in ptl.samples), timebase.periods))
    count = 0
    for ptl in passes:
        for sample in ptl.samples:
            p = _sample_packet(w, ptl.pid, sample, interner)
            p.perf_sample.timebase_count = next(counts)
            p.sequence_flags = flags.SEQ_NEEDS_INCREMENTAL_STATE
            count += 1
    return count


def _sample_packet(w: PacketSource, pid: int, sample: CallstackSample, interner: CallstackInterner) -> Any:
    p = w.packet(SAMPLES_SEQUENCE_ID)
    p.timestamp = sample.ts
    p.timestamp_clock_id = CLOCK_MONOTONIC
    perf = p.perf_sample
    perf.pid = pid
    perf.tid = sample.tid
    if sample.cpu is not None:
        perf.cpu = sample.cpu
    perf.callstack_iid = interner.callstack(sample.frames)
    interner.flush(p)
    return p
