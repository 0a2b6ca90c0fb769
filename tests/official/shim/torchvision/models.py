"""`torchvision.models`: YOLOv7's second-stage classifier reads it; detect.py never enables that stage."""
