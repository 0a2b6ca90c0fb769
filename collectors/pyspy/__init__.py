"""py-spy: Python and native stacks of every thread sampled from outside; its microseconds since start are put on
CLOCK_MONOTONIC by fitting its pipeline-thread stacks to the run's stage markers.
"""
