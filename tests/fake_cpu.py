"""A pytest plugin that makes this host read as another CPU, to find tests that depend on the one they run on:

    cd tests && HWPROF_TEST_CPU=xeon-amx ../.venv/bin/python -m pytest -p fake_cpu test_x.py

It replaces /proc/cpuinfo as hwprof.core.host reads it (cpuinfo_text) in the test process; child processes
(a real collect) still read the real one."""

from __future__ import annotations

import os

from hwprof.core import host

CPUS = {
    "xeon-amx": (
        "Intel(R) Xeon(R) Platinum 8480+",
        "fpu avx avx2 fma avx512f avx512_bf16 avx512_vnni avx_vnni amx_tile amx_bf16 amx_int8",
    ),
    "epyc-avx512": ("AMD EPYC", "fpu avx avx2 fma avx512f avx512_bf16 avx512_vnni"),
    "epyc-no-avx512": ("AMD EPYC 7B13", "fpu sse sse2 avx avx2 fma"),
}


def cpuinfo(name: str, cpus: int = 2) -> str:
    """/proc/cpuinfo of `cpus` processors of one of CPUS."""
    model, flags = CPUS[name]
    return "".join(f"processor\t: {i}\nmodel name\t: {model}\nflags\t\t: {flags}\n\n" for i in range(cpus))


def pytest_configure() -> None:
    name = os.environ.get("HWPROF_TEST_CPU", "xeon-amx")
    if name not in CPUS:
        raise ValueError(f"HWPROF_TEST_CPU={name!r}: not one of {', '.join(CPUS)}")
    text = cpuinfo(name)
    host.cpuinfo_text = lambda: text
