"""The functions a YOLO program spends its time in between forwards, known by name, and the stage each is.

The names are those of hwprof's own pipeline where the work is the same (hwprof.workload.pipeline): `load`
reads and decodes an image or a frame (the pipeline's cv2.imread), `preprocess` letterboxes (the pipeline's
preprocess is letterbox, then BGR->RGB, HWC->CHW, /255; in a program the conversions are its own code and fall
in `other` unless it marks them), `postprocess` is NMS and the boxes scaled back to the image (the pipeline's
ultralytics NMS and scale_boxes). Two more have no counterpart in the pipeline: `draw` (boxes drawn on the
image) and `write` (an image or a video frame written out, or encoded to be); `show` is a window's display and
its key wait (detect.py's --view-img). `backward` is a training step's backward pass (Tensor.backward,
torch.autograd.backward and .grad): a program that trains runs it after its forwards, and its time is not the
program's own code (`other`); the report then says the run measured forward + backward, not inference.

Finer functions (cv2.resize, cv2.cvtColor, torch.from_numpy) are left out on purpose: they are parts of the
stages above, and a wrapper per call of a small function would cost more than it tells. Mark them with
--stage or hwprof.stage where they matter.

A module a program never imports costs nothing: its entries wait for an import that does not come.
"""

from __future__ import annotations

from hwprof.core.program_spec import StageTarget

LOAD, PREPROCESS, POSTPROCESS, DRAW, WRITE, SHOW = "load", "preprocess", "postprocess", "draw", "write", "show"
BACKWARD = "backward"

_KNOWN: dict[str, dict[str, tuple[str, ...]]] = {
    LOAD: {
        "cv2": (
            "imread",
            "imdecode",
            "imreadmulti",
            "VideoCapture.read",
            "VideoCapture.grab",
            "VideoCapture.retrieve",
        ),
        "ultralytics.utils.patches": ("imread", "imread_unicode"),
        "PIL.Image": ("open",),
        "PIL.ImageFile": ("ImageFile.load",),
    },
    PREPROCESS: {
        "ultralytics.data.augment": ("LetterBox.__call__",),
        "ultralytics.engine.predictor": ("BasePredictor.preprocess",),
        "utils.datasets": ("letterbox",),  # YOLOv7, and YOLOv5 before v6.2
        "utils.augmentations": ("letterbox",),  # YOLOv5
    },
    POSTPROCESS: {
        "ultralytics.utils.nms": ("non_max_suppression",),
        "ultralytics.utils.ops": ("non_max_suppression", "scale_boxes"),  # NMS in ops before ultralytics 8.3.x
        "ultralytics.models.yolo.detect.predict": ("DetectionPredictor.postprocess",),
        "utils.general": ("non_max_suppression", "scale_coords", "scale_boxes"),  # YOLOv7 and YOLOv5
    },
    DRAW: {
        "utils.plots": ("plot_one_box", "Annotator.box_label"),  # YOLOv7; YOLOv5
        "ultralytics.utils.plotting": ("Annotator.box_label",),
        "ultralytics.engine.results": ("Results.plot",),
    },
    WRITE: {
        "cv2": ("imwrite", "imencode", "VideoWriter.write"),
        "ultralytics.utils.patches": ("imwrite",),
    },
    SHOW: {
        "cv2": ("imshow", "waitKey"),
        "ultralytics.utils.patches": ("imshow",),
    },
    BACKWARD: {
        "torch": ("Tensor.backward",),  # calls torch.autograd.backward: nested, marked once
        "torch.autograd": ("backward", "grad"),
    },
}


def known_targets() -> list[StageTarget]:
    """Every function hwprof times by name, as targets (a module the program never imports is skipped)."""
    return [
        StageTarget(stage, module, attr)
        for stage, modules in _KNOWN.items()
        for module, attrs in modules.items()
        for attr in attrs
    ]
