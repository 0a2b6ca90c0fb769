"""The paper peak FP32 rate of this CPU: cores x clock x FLOPs per cycle, each factor with its source.

A figure computed, never measured: it stands beside the measured roof (hardware/machine.py) so that a
reader sees how far the library's best kernel is from the silicon's nominal rate, and whether the clock
/proc/cpuinfo states is the one the cores run at (a measured roof above the paper figure says the cores
run faster than the stated clock: boost, or a VM that states its host's base or TSC clock).

FLOPs per cycle = 2 (an FMA is a multiply and an add) x FMA units per core x FP32 lanes per unit. The
lanes come from the ISA flags (avx512f: 16, avx: 8, sse: 4) capped by the width of the core's FMA datapath,
and the units and the datapath come from the vendor and CPU family in /proc/cpuinfo by a table: that
table is an assumption by family (a family holds parts that differ), and the text says so. Without the
`fma` flag, a core issues one multiply and one add per cycle: 2 x lanes.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from hwprof.core.host import cpu_flags, cpu_model

ZEN5_DATAPATH = 512


@dataclass(frozen=True)
class Core:
    """One core's FP32 arithmetic, as the family table says: FMA units and their width in bits."""

    fma_units: int
    datapath_bits: int
    basis: str
    """Where the figures come from, said as an assumption by family."""


@dataclass(frozen=True)
class PaperPeak:
    """cores x GHz x FLOP/cycle, or why it is unknown; each factor's source in words."""

    gflops: float | None
    cores: int | None
    cores_source: str
    ghz: float | None
    ghz_source: str
    flop_per_cycle: int | None
    flop_source: str
    host_cores: int | None = None
    """All cores of the host (cores is the run's share: min(threads, host_cores))."""
    reason: str = ""
    """Why there is no figure (a factor unknown); empty when there is one."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        """One line: the figure and its factors, labelled as a paper figure."""
        if self.gflops is None:
            return f"paper peak unknown: {self.reason}"
        return (
            f"{self.gflops:.1f} GFLOP/s paper figure (not measured) = {self.cores} cores x {self.ghz:.2f} GHz x "
            f"{self.flop_per_cycle} FP32 FLOP/cycle"
        )


def _field(text: str, name: str) -> list[str]:
    return [m.strip() for m in re.findall(rf"^{re.escape(name)}\s*:\s*(.*)$", text, re.MULTILINE)]


def host_cores(text: str) -> tuple[int | None, str]:
    """Physical cores: distinct (physical id, core id) pairs; else logical processors (SMT unknown)."""
    processors = len(_field(text, "processor"))
    pairs = set(zip(_field(text, "physical id"), _field(text, "core id"), strict=False))
    if pairs and len(_field(text, "core id")) == processors:
        return len(pairs), "distinct (physical id, core id) pairs in /proc/cpuinfo"
    if processors:
        return processors, "processors in /proc/cpuinfo (no core ids: hyperthreads, if any, counted as cores)"
    return None, "/proc/cpuinfo lists no processors"


def clock_ghz(text: str) -> tuple[float | None, str]:
    """The rated clock in the model name ("@ 2.10GHz"), else the highest `cpu MHz` line."""
    rated = re.search(r"@\s*([\d.]+)\s*GHz", cpu_model(text))
    if rated:
        return float(rated.group(1)), "the rated clock in the model name (base clock; boost is higher)"
    mhz = [float(v) for v in _field(text, "cpu MHz") if re.fullmatch(r"[\d.]+", v)]
    if mhz:
        return max(mhz) / 1e3, (
            "`cpu MHz` of /proc/cpuinfo (the clock the kernel states; in a VM often the host's base or TSC "
            "clock, below boost)"
        )
    return None, "no clock in /proc/cpuinfo (no `@ N GHz` in the model name, no `cpu MHz`)"


def _amd_core(family: int, model: int) -> Core | None:
    if family == 0x17 and model < 0x30:
        return Core(2, 128, "AMD family 0x17 before model 0x30 (Zen, Zen+): 2 FMA units of 128 bits")
    if family == 0x17:
        return Core(2, 256, "AMD family 0x17 from model 0x30 (Zen 2): 2 FMA units of 256 bits")
    if family == 0x19:
        return Core(2, 256, "AMD family 0x19 (Zen 3, Zen 4): 2 FMA units of 256 bits (Zen 4 splits AVX-512 ops)")
    if family == 0x1A:
        return Core(
            2,
            ZEN5_DATAPATH,
            "AMD family 0x1A (Zen 5): 2 FMA units of 512 bits as in EPYC and desktop parts "
            "(mobile Zen 5 splits AVX-512 ops: half this)",
        )
    return None


def _intel_core(model_name: str, flags: set[str]) -> Core:
    if "avx512f" in flags:
        one = re.search(r"Xeon.*\b(Bronze|Silver|Gold 5[12]\d\d)", model_name)
        if one:
            return Core(1, 512, f"Intel {one.group(1)} AVX-512 core: 1 FMA unit of 512 bits")
        return Core(2, 512, "Intel AVX-512 core: 2 FMA units of 512 bits (Xeon Gold 6xxx, Platinum and later)")
    return Core(2, 256, "Intel core: 2 FMA units of 256 bits (Haswell and later)")


def _vector_bits(flags: set[str]) -> tuple[int, str]:
    for flag, bits in (("avx512f", 512), ("avx2", 256), ("avx", 256), ("sse", 128)):
        if flag in flags:
            return bits, flag
    return 32, "no vector flag"


def flop_per_cycle(text: str) -> tuple[int | None, str]:
    """FP32 FLOPs per cycle per core from the ISA flags and the vendor/family table, with its source."""
    flags = cpu_flags(text)
    if not flags:
        return None, "no flags line in /proc/cpuinfo"
    bits, flag = _vector_bits(flags)
    vendor = next(iter(_field(text, "vendor_id")), "")
    family_s, model_s = next(iter(_field(text, "cpu family")), ""), next(iter(_field(text, "model")), "")
    core = None
    if vendor == "AuthenticAMD" and family_s.isdigit() and model_s.isdigit():
        core = _amd_core(int(family_s), int(model_s))
    elif vendor == "GenuineIntel":
        core = _intel_core(cpu_model(text), flags)
    if core is None:
        where = f"{vendor or 'unknown vendor'} family {family_s or '?'}"
        core = Core(2, bits, f"{where} not in hwprof's table: 2 FMA units of the ISA's full width assumed")
    lanes = min(bits, core.datapath_bits) // 32
    if "fma" not in flags:
        return 2 * lanes, f"{flag} ({bits}-bit) without fma: 1 multiply + 1 add of {lanes} FP32 lanes per cycle"
    return 2 * core.fma_units * lanes, (
        f"ISA from the flags: {flag} ({bits}-bit), fma; per core {core.fma_units} FMA x {lanes} FP32 lanes x 2 "
        f"(assumed by CPU family: {core.basis})"
    )


def paper_peak(text: str, threads: int | None = None) -> PaperPeak:
    """This CPU's paper FP32 peak from /proc/cpuinfo text, for min(threads, cores) cores."""
    cores, cores_source = host_cores(text)
    ghz, ghz_source = clock_ghz(text)
    per_cycle, flop_source = flop_per_cycle(text)
    used = cores
    if cores is not None and threads is not None and threads < cores:
        used, cores_source = threads, f"the run's {threads} threads on {threads} of {cores} cores ({cores_source})"
    unknown = [why for value, why in ((used, cores_source), (ghz, ghz_source), (per_cycle, flop_source)) if not value]
    gflops = used * ghz * per_cycle if used and ghz and per_cycle else None
    return PaperPeak(
        gflops, used, cores_source, ghz, ghz_source, per_cycle, flop_source, cores, reason="; ".join(unknown)
    )
