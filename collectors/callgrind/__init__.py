"""callgrind: simulated instruction and cache-miss counts per layer under valgrind, dumped by client requests at
every measured marker, so its parts line up with the markers on CLOCK_MONOTONIC.
"""
