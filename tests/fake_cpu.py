"""A pytest plugin that makes this host read as another CPU, to find tests that depend on the one they run on:

    cd tests && HWPROF_TEST_CPU=xeon-amx ../.venv/bin/python -m pytest -p fake_cpu test_x.py

It replaces /proc/cpuinfo as hwprof reads it (hwprof.core.host_facts: FakeCpu, this machine but for its cpuinfo) in
the test process; child processes (a real collect) still read the real one. A whole other host, recorded, is
replayed by tests/test_recorded_hosts.py."""

from __future__ import annotations

import os

from hwprof.core import host_facts

CPUS = {
    "xeon-amx": (
        "Intel(R) Xeon(R) Platinum 8480+",
        "fpu avx avx2 fma avx512f avx512_bf16 avx512_vnni avx_vnni amx_tile amx_bf16 amx_int8",
    ),
    "epyc-avx512": ("AMD EPYC", "fpu avx avx2 fma avx512f avx512_bf16 avx512_vnni"),
    "epyc-no-avx512": ("AMD EPYC 7B13", "fpu sse sse2 avx avx2 fma"),
}


IDS = {
    "xeon-amx": ("GenuineIntel", 6, 143, 2000.0),
    "epyc-avx512": ("AuthenticAMD", 25, 17, 2400.0),
    "epyc-no-avx512": ("AuthenticAMD", 25, 1, 2450.0),
}
"""Vendor, CPU family, model and `cpu MHz` of each of CPUS (Sapphire Rapids, Zen 4 Genoa, Zen 3 Milan)."""


def cpuinfo(name: str, cpus: int = 2) -> str:
    """/proc/cpuinfo of `cpus` processors (one core each, one socket) of one of CPUS."""
    model, flags = CPUS[name]
    vendor, family, number, mhz = IDS[name]
    return "".join(
        f"processor\t: {i}\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: {number}\n"
        f"model name\t: {model}\ncpu MHz\t\t: {mhz:.3f}\nphysical id\t: 0\ncore id\t\t: {i}\n"
        f"flags\t\t: {flags}\n\n"
        for i in range(cpus)
    )


class FakeCpu(host_facts.MachineFacts):
    """This machine, but for its /proc/cpuinfo: one of CPUS'."""

    def __init__(self, name: str) -> None:
        self.text = cpuinfo(name)

    def cpuinfo(self) -> str:
        return self.text


def pytest_configure() -> None:
    name = os.environ.get("HWPROF_TEST_CPU", "xeon-amx")
    if name not in CPUS:
        raise ValueError(f"HWPROF_TEST_CPU={name!r}: not one of {', '.join(CPUS)}")
    host_facts.use(FakeCpu(name))
