"""Hardware probes: CPU and GPU peaks, whether CUDA runs here (perf_event_open is hwprof.perf)."""
