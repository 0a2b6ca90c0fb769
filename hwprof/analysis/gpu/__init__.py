"""The GPU run's views: its kernels, roofline, candidates and advice."""
