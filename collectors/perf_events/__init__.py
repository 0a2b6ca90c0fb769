"""perf_events counters: hardware and software counts per layer from inherited perf_event groups read in-process
at every marker, so each reading is on the markers' clock.
"""
