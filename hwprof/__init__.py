"""hwprof: hardware-counter profiling of YOLO inference on CPUs."""

__version__ = "0.1.0"

from hwprof.stage_api import stage as stage  # the public `hwprof.stage`: a module that imports nothing
