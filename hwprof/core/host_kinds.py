"""Hosts as a sweep dimension: what kind of machine a run ran on, and which software it ran.

A kind of machine is (CPU model, logical CPUs, ISA flags), read from run.json "host" (hwprof.core.host.host_info):
two nodes of one kind give comparable figures, two kinds do not. Software versions (torch, the runtime,
Python, hwprof) are not part of the kind: two nodes of one kind may differ in them, and the sweep table
says so beside the figures instead of splitting the kind.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ISA_ORDER = ("amx_tile", "avx512_bf16", "avx512_vnni", "avx512f", "avx2", "fma")
"""host_info's ISA flags, widest first: the first one a kind has names it."""
ISA_NOT_RECORDED = "isa-not-recorded"
"""The ISA of a host whose run.json holds no flags (an imported recording): never read as "no avx2"."""


@dataclass(frozen=True, order=True)
class HostKind:
    cpu_model: str
    cores: int
    """Logical CPUs."""
    isa: tuple[str, ...]

    @property
    def label(self) -> str:
        if ISA_NOT_RECORDED in self.isa:
            return f"{self.cpu_model}, {self.cores} CPUs, ISA not recorded"
        widest = next((f for f in ISA_ORDER if f in self.isa), "no avx2")
        return f"{self.cpu_model}, {self.cores} CPUs, {widest}"

    @property
    def slug(self) -> str:
        """A folder name for this kind's runs: readable, and unique by a short hash of the whole kind."""
        readable = re.sub(r"[^a-z0-9]+", "-", self.label.lower()).strip("-")
        digest = hashlib.sha1(repr((self.cpu_model, self.cores, self.isa)).encode()).hexdigest()[:6]
        return f"{readable}-{digest}"

    def matches(self, selector: str) -> bool:
        """`--hosts` names a kind by its slug, or by a case-insensitive part of its CPU model or label."""
        s = selector.strip().lower()
        return bool(s) and (s == self.slug or s in self.cpu_model.lower() or s in self.label.lower())


def host_kind(host: Mapping[str, Any]) -> HostKind:
    """The kind of machine of a run.json "host" record (or of host_info())."""
    flags = host.get("isa_flags")
    isa = (ISA_NOT_RECORDED,) if flags is None else tuple(sorted(str(f) for f in flags))
    return HostKind(str(host.get("cpu_model") or "unknown"), int(host.get("logical_cpus") or 0), isa)


def software(host: Mapping[str, Any], runtime: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The versions that change what a point measures: torch, the runtime that ran the forward, Python, hwprof."""
    packages = host.get("packages") or {}
    torch = host.get("torch") or {}
    out = {
        "torch": str(torch.get("version") or packages.get("torch") or "?"),
        "python": str(host.get("python") or "?"),
        "hwprof": str(packages.get("hwprof") or "?"),
    }
    runtime = runtime or {}
    name = str(runtime.get("name") or "torch")
    if name != "torch":
        out[name] = str(runtime.get("version") or "?")
    return out


def software_text(versions: Mapping[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in versions.items())


def differing_software(rows: Iterable[Mapping[str, str]]) -> list[str]:
    """The packages at two versions or more among the rows (a runtime only some rows use is not a difference)."""
    rows = list(rows)
    names = sorted({k for r in rows for k in r})
    return [n for n in names if len({r[n] for r in rows if n in r}) > 1]


def select_kinds(kinds: Sequence[HostKind], selectors: Sequence[str]) -> list[HostKind]:
    """The kinds `--hosts` names, in the cluster's order; a selector no kind matches is refused."""
    if not selectors:
        return list(kinds)
    for s in selectors:
        if not any(k.matches(s) for k in kinds):
            have = "; ".join(f"{k.slug} ({k.label})" for k in kinds) or "none"
            raise ValueError(f"--hosts {s!r}: no node of the cluster is of that kind; kinds: {have}")
    return [k for k in kinds if any(k.matches(s) for s in selectors)]


def group_by_kind(hosts: Mapping[str, Mapping[str, Any]]) -> dict[HostKind, list[str]]:
    """Node id -> host record, grouped by kind: kind -> node ids, kinds in order of their first node."""
    groups: dict[HostKind, list[str]] = {}
    for node, host in hosts.items():
        groups.setdefault(host_kind(host), []).append(node)
    return groups
