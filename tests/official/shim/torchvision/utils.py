"""`torchvision.utils.save_image`: imported by YOLOv7's datasets.py, never called by detect.py."""


def save_image(*_args: object, **_kwargs: object) -> None:
    raise NotImplementedError("the test shim of torchvision cannot save images")
