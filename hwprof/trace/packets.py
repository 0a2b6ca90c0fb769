"""Perfetto packets as the trace writer emits them: interned names and arguments, timestamps as deltas on an
incremental clock, packets serialized in chunks.
"""

from __future__ import annotations

import json
from typing import Any, BinaryIO

from hwprof.trace.samples import CLOCK_MONOTONIC

SEQUENCE_ID = 1
DESCRIPTOR_SEQUENCE_ID = 2
"""Track descriptors go on a sequence of their own: on the events' sequence, the trace processor
would take the last thread descriptor for the thread that wrote every event of the sequence."""
CLOCK_DELTA = 64
"""A sequence-scoped incremental clock in ns of CLOCK_MONOTONIC: each event packet carries the
time since the previous one (1-3 bytes instead of 6), which needs packets in time order."""
PACKETS_PER_CHUNK = 20_000
ANNOTATION_CACHE = 1 << 16
"""Distinct flat argument sets whose encoded annotations are kept for reuse."""
INTERN_MAX_CHARS = 512
"""Longer string values are written inline: they rarely repeat."""


class _Interner:
    """Per-kind string -> iid; new entries ride on the next packet written (Perfetto's rule)."""

    def __init__(self) -> None:
        self._tables: dict[str, dict[str, int]] = {
            "event_names": {},
            "event_categories": {},
            "debug_annotation_names": {},
            "debug_annotation_string_values": {},
        }
        self._pending: list[tuple[str, int, str]] = []
        self.count = 0

    def iid(self, kind: str, text: str) -> int:
        table = self._tables[kind]
        iid = table.get(text)
        if iid is None:
            iid = table[text] = len(table) + 1
            self._pending.append((kind, iid, text))
            self.count += 1
        return iid

    def flush(self, packet: Any) -> None:
        if not self._pending:
            return
        data = packet.interned_data
        for kind, iid, text in self._pending:
            entry = getattr(data, kind).add()
            entry.iid = iid
            if kind == "debug_annotation_string_values":
                entry.str = text.encode()
            else:
                entry.name = text
        self._pending.clear()


class TraceWriter:
    def __init__(self, out: BinaryIO) -> None:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
        from perfetto.trace_builder.proto_builder import TraceProtoBuilder

        self.pb = pb
        self._builder_cls = TraceProtoBuilder
        self._out = out
        self._builder = TraceProtoBuilder()
        self._in_chunk = 0
        self.packets = 0
        self.interner = _Interner()
        self._next_uuid = 1
        self._last_ts = 0
        self._annotations: dict[tuple[Any, ...], list[Any]] = {}

    def uuid(self) -> int:
        self._next_uuid += 1
        return self._next_uuid

    def packet(self, sequence: int = SEQUENCE_ID) -> Any:
        if self._in_chunk >= PACKETS_PER_CHUNK:
            self.flush()
        self._in_chunk += 1
        self.packets += 1
        p = self._builder.add_packet()
        p.trusted_packet_sequence_id = sequence
        return p

    def event(self, ts: int) -> Any:
        """A packet on the delta clock; events must come in time order."""
        p = self.packet()
        p.timestamp = ts - self._last_ts
        self._last_ts = ts
        return p

    def flush(self) -> None:
        if self._in_chunk:
            self._out.write(self._builder.serialize())
        self._builder = self._builder_cls()
        self._in_chunk = 0

    def start(self, t0: int, default_track: int) -> None:
        """The events' sequence: incremental state, the delta clock, and the busiest track as the
        default of every event (events on it then carry no track uuid)."""
        p = self.packet()
        p.sequence_flags = self.pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
        p.trace_packet_defaults.timestamp_clock_id = CLOCK_DELTA
        p.trace_packet_defaults.track_event_defaults.track_uuid = default_track
        p.timestamp = t0
        p.timestamp_clock_id = CLOCK_MONOTONIC
        for clock_id, incremental in ((CLOCK_MONOTONIC, False), (CLOCK_DELTA, True)):
            clock = p.clock_snapshot.clocks.add()
            clock.clock_id = clock_id
            clock.timestamp = t0
            clock.is_incremental = incremental
        p.clock_snapshot.primary_trace_clock = CLOCK_MONOTONIC
        self._last_ts = t0

    def annotate(self, event: Any, args: dict[str, Any]) -> None:
        """Write args as debug annotations; identical flat args (samples of one stack in every
        iteration) are copied from the first time they were encoded."""
        key = _args_key(args)
        cached = self._annotations.get(key) if key is not None else None
        if cached is not None:
            event.debug_annotations.extend(cached)
            return
        for name, value in args.items():
            if value is not None:
                self._annotation(event.debug_annotations.add(), name, value)
        if key is not None and len(self._annotations) < ANNOTATION_CACHE:
            copies = []
            for ann in event.debug_annotations:
                copy = self.pb.DebugAnnotation()
                copy.CopyFrom(ann)
                copies.append(copy)
            self._annotations[key] = copies

    def _annotation(self, ann: Any, key: str, value: Any) -> None:
        intern = self.interner.iid
        ann.name_iid = intern("debug_annotation_names", key)
        if isinstance(value, bool):
            ann.bool_value = value
        elif isinstance(value, int) and -(1 << 63) <= value < (1 << 63):
            ann.int_value = value
        elif isinstance(value, int | float):
            ann.double_value = float(value)
        elif isinstance(value, dict):
            for k, v in value.items():
                if v is not None:
                    self._annotation(ann.dict_entries.add(), str(k), v)
        elif isinstance(value, list | tuple) and value and all(isinstance(v, str) for v in value):
            for v in value:
                ann.array_values.add().string_value_iid = intern("debug_annotation_string_values", v)
        else:
            text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), default=str)
            if len(text) <= INTERN_MAX_CHARS:
                ann.string_value_iid = intern("debug_annotation_string_values", text)
            else:
                ann.string_value = text


def _args_key(args: dict[str, Any]) -> tuple[Any, ...] | None:
    """A hashable form of flat args (scalars and tuples of them), else None."""
    key = tuple(args.items())
    try:
        hash(key)
    except TypeError:
        return None
    return key
