"""sysstat: RSS, CPU frequency and per-thread CPU time sampled from /proc and sysfs by an in-process thread that
stamps every sample with CLOCK_MONOTONIC.
"""
