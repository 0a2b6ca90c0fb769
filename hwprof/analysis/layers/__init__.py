"""Per-layer tables: time, statistics, memory, shapes, sources, findings and matching across runs."""
