"""A test stand-in for torchvision, which cannot be imported beside this project's CPU torch.

The official YOLOv7 code (the `yolov7detect` sdist) imports torchvision at module level and calls only
`torchvision.ops.nms` and `box_iou` on the paths that `detect.py` runs; the other names it imports
(`roi_pool`, `save_image`, `models`) are never called there and raise if they are. Put the folder that holds
this package first on PYTHONPATH of the official program's process, never of hwprof's own.
"""

from . import models, ops, utils

__version__ = "0.0+hwprof-test-shim"
__all__ = ["models", "ops", "utils"]
