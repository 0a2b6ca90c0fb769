"""RAPL: package, core and DRAM energy from powercap sysfs or perf's power events, read at every marker
in-process and by a sampler thread, both stamped with CLOCK_MONOTONIC: a span's energy is the difference of
the readings at its begin and end markers.
"""
