"""A pytest plugin for scripts/run_tests.py: each pytest-xdist worker on CPUs of its own.

Why: two workers that share every CPU ran the suite slower than one process (their collects' OpenMP teams each
lose a thread to the other worker at every barrier: test_runtimes.py and three program modules took 131 s side by
side against 118 s one after the other), while one CPU each ran them in 67 s. A worker's CPUs are its share of
this process's affinity, dealt round-robin; the collects its tests start inherit them, so their default thread
count (hwprof's: the CPUs it may run on) is the worker's share."""

from __future__ import annotations

import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    worker = getattr(config, "workerinput", None)
    if worker is None:
        return
    index, count = int(str(worker["workerid"]).removeprefix("gw")), int(worker["workercount"])
    cpus = sorted(os.sched_getaffinity(0))
    mine = set(cpus[index::count]) or set(cpus)
    os.sched_setaffinity(0, mine)
