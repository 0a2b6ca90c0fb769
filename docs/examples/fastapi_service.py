"""A FastAPI detection service that `hwprof attach` can measure (docs/attach.md).

    HWPROF_AGENT=1 uvicorn fastapi_service:app --port 8000      # from this folder
    curl --data-binary @bus.jpg http://127.0.0.1:8000/detect
    hwprof attach "$(pgrep -f 'uvicorn fastapi_service')"

The model is called from the event loop's thread (an `async def` endpoint): every call on one thread, which the
trace window's torch.profiler needs. Without HWPROF_AGENT, `import hwprof.agent; hwprof.agent.start()` at start-up
does the same.
"""

import cv2
import numpy as np
import torch
from fastapi import FastAPI, Request
from ultralytics.nn.tasks import DetectionModel
from ultralytics.utils.nms import non_max_suppression

IMGSZ = 320
torch.set_num_threads(1)
model = DetectionModel("yolov8n.yaml", verbose=False).fuse(verbose=False).eval()
app = FastAPI()


def letterbox(image: np.ndarray) -> torch.Tensor:
    height, width = image.shape[:2]
    scale = IMGSZ / max(height, width)
    resized = cv2.resize(image, (round(width * scale), round(height * scale)))
    padded = np.full((IMGSZ, IMGSZ, 3), 114, dtype=np.uint8)
    padded[: resized.shape[0], : resized.shape[1]] = resized
    return torch.from_numpy(padded[:, :, ::-1].transpose(2, 0, 1).copy()).float().div(255).unsqueeze(0)


@app.post("/detect")
async def detect(request: Request) -> dict[str, int]:
    image = cv2.imdecode(np.frombuffer(await request.body(), dtype=np.uint8), cv2.IMREAD_COLOR)
    with torch.no_grad():
        prediction = model(letterbox(image))
    return {"boxes": len(non_max_suppression(prediction, conf_thres=0.25)[0])}
