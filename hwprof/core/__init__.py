"""Records and configuration at the bottom: markers, spans, kernels' kinds, the host, atomic writes."""
