"""The Perfetto trace: the run's records as tracks, written with perfetto's TraceProtoBuilder."""
