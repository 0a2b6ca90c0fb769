"""perf_event_open from Python: the counting engine behind collectors/perf_events/collector.py.

Not a collector. Modules:
- syscall: the ctypes perf_event_open call, event groups, ioctl and read-format parsing.
- events: event names (generic, hw-cache, software, sysfs PMU events, raw terms) -> attributes.
- errors: errno -> (reason, fix) for events the host cannot open.
- counting: pure functions on readings (multiplex scaling, self/inclusive attribution, group
  rotation, derived metrics), shared with the PAPI backend.

Nothing here imports torch.
"""
