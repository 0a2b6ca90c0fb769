"""Scalene: CPU time (Python, native, system) and memory per line of hwprof's code, in a pass of its own; its
sample times are time.perf_counter(), CLOCK_MONOTONIC already, checked against the profiling window and the
stages' marker spans.
"""
