"""NVML: GPU power, energy, utilisation, clocks, memory and temperature sampled beside the pipeline."""
