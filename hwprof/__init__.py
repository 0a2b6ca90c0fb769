"""hwprof: hardware-counter profiling of YOLO inference on CPUs."""

__version__ = "0.1.0"
