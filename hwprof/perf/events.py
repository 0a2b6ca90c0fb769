"""Event names -> perf_event_attr encodings, the way `perf stat -e` spells them.

- generic hardware events: cycles, instructions, cache-misses, ... (PERF_TYPE_HARDWARE)
- hw-cache events: L1-dcache-load-misses, LLC-loads, dTLB-load-misses, ... (PERF_TYPE_HW_CACHE)
- software events: task-clock, page-faults, context-switches, ... (PERF_TYPE_SOFTWARE)
- PMU events from sysfs: `pmu/alias/` (e.g. `msr/tsc/`, `cpu/mem-loads/`), or terms encoded
  through the PMU's format files: `cpu/event=0x3c,umask=0x00/`, `cpu/event=0xd1,umask=0x20,name=x/`
- raw: `rNNNN` (hex config for PERF_TYPE_RAW)

sysfs layout (the host's event source folder, hwprof.core.host_facts; another root for tests): `<root>/<pmu>/type`,
`<root>/<pmu>/format/<term>` holding e.g. `config:0-7,32-35`, `<root>/<pmu>/events/<alias>` holding e.g.
`event=0xc0,umask=0x00`, with optional `<alias>.scale` and `<alias>.unit`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from hwprof.core.host_facts import current
from hwprof.core.uservalue import shown
from hwprof.perf.syscall import PERF_TYPE_HARDWARE, PERF_TYPE_HW_CACHE, PERF_TYPE_RAW, PERF_TYPE_SOFTWARE

GENERIC: dict[str, int] = {
    "cycles": 0,
    "instructions": 1,
    "cache-references": 2,
    "cache-misses": 3,
    "branch-instructions": 4,
    "branch-misses": 5,
    "bus-cycles": 6,
    "stalled-cycles-frontend": 7,
    "stalled-cycles-backend": 8,
    "ref-cycles": 9,
}
SOFTWARE: dict[str, int] = {
    "cpu-clock": 0,
    "task-clock": 1,
    "page-faults": 2,
    "context-switches": 3,
    "cpu-migrations": 4,
    "minor-faults": 5,
    "major-faults": 6,
    "alignment-faults": 7,
    "emulation-faults": 8,
}
ALIASES: dict[str, str] = {
    "cpu-cycles": "cycles",
    "branches": "branch-instructions",
    "idle-cycles-frontend": "stalled-cycles-frontend",
    "idle-cycles-backend": "stalled-cycles-backend",
    "faults": "page-faults",
    "cs": "context-switches",
    "migrations": "cpu-migrations",
}
_CACHES = {"L1-dcache": 0, "L1-icache": 1, "LLC": 2, "dTLB": 3, "iTLB": 4, "branch": 5, "node": 6}
_OPS = {"load": 0, "store": 1, "prefetch": 2}
HW_CACHE: dict[str, int] = {
    f"{cache}-{op}{suffix}": cid | (oid << 8) | (rid << 16)
    for cache, cid in _CACHES.items()
    for op, oid in _OPS.items()
    for suffix, rid in (("s", 0), ("-misses", 1))
}
TIME_EVENTS = frozenset({"task-clock", "cpu-clock"})

DEFAULT_HARDWARE: tuple[str, ...] = (
    "cycles",
    "instructions",
    "cache-references",
    "cache-misses",
    "branch-instructions",
    "branch-misses",
    "stalled-cycles-frontend",
    "stalled-cycles-backend",
    "ref-cycles",
    "L1-dcache-loads",
    "L1-dcache-load-misses",
    "LLC-loads",
    "LLC-load-misses",
    "dTLB-load-misses",
)
DEFAULT_SOFTWARE: tuple[str, ...] = ("task-clock", "page-faults", "context-switches", "cpu-migrations")
DEFAULT_EVENTS: tuple[str, ...] = DEFAULT_HARDWARE + DEFAULT_SOFTWARE


class UnknownEventError(ValueError):
    """An event name this host does not know; the message lists what it has."""


@dataclass(frozen=True)
class EventSpec:
    name: str
    type: int
    config: int
    config1: int = 0
    config2: int = 0
    source: str = "generic"
    """generic, hw-cache, software, sysfs or raw."""
    pmu: str = ""
    scale: float = 1.0
    unit: str = ""

    @property
    def software(self) -> bool:
        """Software events are always schedulable, so they are never rotated."""
        return self.type == PERF_TYPE_SOFTWARE

    @property
    def display_unit(self) -> str:
        if self.unit:
            return self.unit
        return "ns" if self.name in TIME_EVENTS else "count"


@dataclass
class Pmu:
    name: str
    type: int
    formats: dict[str, list[tuple[str, int, int]]] = field(default_factory=dict)
    """term -> [(config field, low bit, high bit), ...] in the order the bits are filled."""
    events: dict[str, str] = field(default_factory=dict)
    """alias -> term string."""
    scales: dict[str, float] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)


_FORMAT = re.compile(r"^(config[12]?):([\d,\-\s]+)$")


def parse_format(text: str) -> list[tuple[str, int, int]]:
    """`config:0-7,32-35` -> [("config", 0, 7), ("config", 32, 35)]."""
    match = _FORMAT.match(text.strip())
    if not match:
        raise ValueError(f"unrecognised PMU format {text.strip()!r}")
    config, spans = match.groups()
    out = []
    for part in spans.split(","):
        part = part.strip()
        low, _, high = part.partition("-")
        out.append((config, int(low), int(high or low)))
    return out


def parse_terms(text: str) -> list[tuple[str, str | None]]:
    """`event=0x3c,umask=0x01,edge` -> [("event", "0x3c"), ("umask", "0x01"), ("edge", None)]."""
    terms: list[tuple[str, str | None]] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        key, eq, value = part.partition("=")
        terms.append((key.strip(), value.strip() if eq else None))
    return terms


def _int(value: str) -> int:
    return int(value, 0)


def load_pmu(path: Path) -> Pmu | None:
    try:
        pmu_type = int((path / "type").read_text().strip())
    except (OSError, ValueError):
        return None
    pmu = Pmu(path.name, pmu_type)
    fmt_dir = path / "format"
    if fmt_dir.is_dir():
        for entry in sorted(fmt_dir.iterdir()):
            try:
                pmu.formats[entry.name] = parse_format(entry.read_text())
            except (OSError, ValueError):
                continue
    ev_dir = path / "events"
    if ev_dir.is_dir():
        for entry in sorted(ev_dir.iterdir()):
            try:
                text = entry.read_text().strip()
            except OSError:
                continue
            alias, dot, suffix = entry.name.partition(".")
            if not dot:
                pmu.events[alias] = text
            elif suffix == "scale":
                try:
                    pmu.scales[alias] = float(text)
                except ValueError:
                    continue
            elif suffix == "unit":
                pmu.units[alias] = text
    return pmu


def load_pmus(root: Path | None = None) -> dict[str, Pmu]:
    """The PMUs under root (the host's event source folder by default), by name."""
    root = current().event_source_root() if root is None else root
    if not root.is_dir():
        return {}
    pmus = {}
    for path in sorted(root.iterdir()):
        pmu = load_pmu(path)
        if pmu is not None:
            pmus[pmu.name] = pmu
    return pmus


def encode_terms(pmu: Pmu, terms: Iterable[tuple[str, str | None]]) -> tuple[dict[str, int], str | None]:
    """Fill config/config1/config2 from terms through the PMU's format; returns (configs, name=)."""
    configs = {"config": 0, "config1": 0, "config2": 0}
    name: str | None = None
    for key, value in terms:
        if key == "name":
            name = value
        elif key in configs and key not in pmu.formats:
            if value is None:
                raise ValueError(f"{pmu.name}/{key}/ needs a value")
            configs[key] |= _int(value)
        elif key in pmu.formats:
            number = 1 if value is None else _int(value)
            _place(configs, pmu.formats[key], number, f"{pmu.name}/{key}={value}/")
        elif value is None and key in pmu.events:
            sub, _ = encode_terms(pmu, parse_terms(pmu.events[key]))
            for field_name, bits in sub.items():
                configs[field_name] |= bits
        else:
            known = [*sorted(pmu.formats), "config", "config1", "config2", "name"]
            raise ValueError(f"unknown term '{shown(key)}' for PMU {pmu.name}; its terms: {', '.join(known)}")
    return configs, name


def _place(configs: dict[str, int], spans: list[tuple[str, int, int]], value: int, what: str) -> None:
    width = sum(high - low + 1 for _, low, high in spans)
    if value < 0 or value >> width:
        raise ValueError(f"{what}: value does not fit in {width} bits")
    shift = 0
    for config, low, high in spans:
        bits = high - low + 1
        configs[config] |= ((value >> shift) & ((1 << bits) - 1)) << low
        shift += bits


_PMU_EVENT = re.compile(r"^([A-Za-z0-9_.\-]+)/(.*)/$")
_RAW = re.compile(r"^r([0-9a-fA-F]+)$")


class EventResolver:
    """Resolves names against the built-in tables and this host's sysfs PMUs."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = current().event_source_root() if root is None else root
        self.pmus = load_pmus(self.root)

    def resolve(self, name: str) -> EventSpec:
        text = name.strip()
        canonical = ALIASES.get(text, text)
        if canonical in GENERIC:
            return EventSpec(canonical, PERF_TYPE_HARDWARE, GENERIC[canonical], source="generic")
        if canonical in SOFTWARE:
            return EventSpec(canonical, PERF_TYPE_SOFTWARE, SOFTWARE[canonical], source="software")
        if canonical in HW_CACHE:
            return EventSpec(canonical, PERF_TYPE_HW_CACHE, HW_CACHE[canonical], source="hw-cache")
        raw = _RAW.match(text)
        if raw:
            return EventSpec(text, PERF_TYPE_RAW, int(raw.group(1), 16), source="raw")
        match = _PMU_EVENT.match(text)
        if match:
            return self._pmu_event(text, match.group(1), match.group(2))
        owners = [p for p in self.pmus.values() if text in p.events]
        if len(owners) == 1:
            return self._pmu_event(f"{owners[0].name}/{text}/", owners[0].name, text)
        if len(owners) > 1:
            choices = ", ".join(f"{p.name}/{text}/" for p in owners)
            raise UnknownEventError(f"event {text!r} is ambiguous on this host; use one of: {choices}")
        raise UnknownEventError(f"unknown event '{shown(text)}'")

    def _pmu_event(self, text: str, pmu_name: str, body: str) -> EventSpec:
        pmu = self.pmus.get(pmu_name)
        if pmu is None:
            have = ", ".join(sorted(self.pmus)) or "none"
            raise UnknownEventError(f"unknown PMU '{shown(pmu_name)}' in '{shown(text)}'; this host's PMUs: {have}")
        terms = parse_terms(body)
        if not terms:
            raise UnknownEventError(f"event {text!r} names no event or terms")
        try:
            configs, display = encode_terms(pmu, terms)
        except ValueError as exc:
            raise UnknownEventError(f"{text}: {exc}") from None
        alias = terms[0][0] if len(terms) == 1 and terms[0][1] is None else None
        return EventSpec(
            display or text,
            pmu.type,
            configs["config"],
            configs["config1"],
            configs["config2"],
            source="sysfs",
            pmu=pmu.name,
            scale=pmu.scales.get(alias, 1.0) if alias else 1.0,
            unit=pmu.units.get(alias, "") if alias else "",
        )

    def resolve_all(self, names: Iterable[str], opens: Callable[[EventSpec], bool] | None = None) -> list[EventSpec]:
        """Resolve every name (duplicates dropped); one error naming every unknown one."""
        specs: list[EventSpec] = []
        errors: list[str] = []
        for name in names:
            try:
                spec = self.resolve(name)
            except UnknownEventError as exc:
                errors.append(str(exc))
                continue
            if spec.name not in {s.name for s in specs}:
                specs.append(spec)
        if errors:
            have = self.host_events(opens)
            raise UnknownEventError(f"{'; '.join(errors)}. This host has: {have}")
        return specs

    def host_events(self, opens: Callable[[EventSpec], bool] | None = None, limit: int = 80) -> str:
        """The names this host offers (built-in ones filtered by `opens`), for error messages."""
        builtin = [self.resolve(n) for n in (*SOFTWARE, *GENERIC, *HW_CACHE)]
        names = [s.name for s in builtin if opens is None or opens(s)]
        names += [f"{p.name}/{alias}/" for p in self.pmus.values() for alias in p.events]
        shown = ", ".join(names[:limit])
        if len(names) > limit:
            shown += f", ... and {len(names) - limit} more"
        return shown + "; raw events: pmu/event=0x..,umask=0x../ (terms in <pmu>/format) or rNNNN"
