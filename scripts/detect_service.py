"""An example inference service: YOLO detections over HTTP, to try `hwprof attach` on (and its tests' service).

    HWPROF_AGENT=1 python scripts/detect_service.py --port 8000 &
    curl --data-binary @bus.jpg http://127.0.0.1:8000/detect
    hwprof attach $!

POST /agent with `start` or `stop` starts or stops hwprof's agent in this process (hwprof.agent.start()/stop(), as a
service may do from its own admin endpoint; scripts/bench_agent_idle.py measures the idle agent's cost with it).
POST /detect with a JPEG (or PNG) body answers {"boxes": N, "inference_ms": T, "request_ms": R}: T is the service's
own time of its model's call for that request, R the request's time in this handler. GET /health answers "ok". The
standard library's ThreadingHTTPServer on the loopback address, one thread per request, which decodes the image
and letterboxes it to --imgsz; the model (ultralytics' DetectionModel, built from its YAML: random weights, seeded;
`YOLO.predict` would import torchvision) runs on one model thread that takes the requests' batches in turn from a
queue, as services that share one model do (--per-request: called in each request's own thread instead, under a
lock); the boxes are kept by ultralytics' non_max_suppression.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import cv2
import numpy as np
import torch
from ultralytics.nn.tasks import DetectionModel
from ultralytics.utils.nms import non_max_suppression


def letterbox(image: np.ndarray, size: int) -> torch.Tensor:
    """The image scaled to fit size x size, padded with grey, as a 1x3xSxS float tensor in [0, 1]."""
    height, width = image.shape[:2]
    scale = size / max(height, width)
    resized = cv2.resize(image, (round(width * scale), round(height * scale)), interpolation=cv2.INTER_LINEAR)
    padded = np.full((size, size, 3), 114, dtype=np.uint8)
    padded[: resized.shape[0], : resized.shape[1]] = resized
    return torch.from_numpy(padded[:, :, ::-1].transpose(2, 0, 1).copy()).float().div(255).unsqueeze(0)


def hook_state(model: torch.nn.Module) -> dict[str, int | bool]:
    """What a profiler may leave on the model, in torch and in the process (GET /hooks; what `hwprof attach`'s
    tests read): the modules' hooks, torch's global module hooks, instance-level forwards, whether a profiler is
    on, and whether Python's GC is (a collector's close once held it off in the service: its calls 1.35x slower
    after the attach)."""
    from torch.nn.modules import module as torch_module

    modules = list(model.modules())
    return {
        "forward_hooks": sum(len(m._forward_hooks) for m in modules),
        "forward_pre_hooks": sum(len(m._forward_pre_hooks) for m in modules),
        "global_hooks": len(torch_module._global_forward_hooks) + len(torch_module._global_forward_pre_hooks),
        "wrapped_forwards": sum("forward" in vars(m) for m in modules),
        "profiler_on": bool(torch.autograd.profiler._is_profiler_enabled),
        "gc_enabled": gc.isenabled(),
    }


class ModelThread:
    """The model's one thread: each request hands it a batch and waits for the prediction and its time."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.jobs: queue.Queue[tuple[torch.Tensor, Future[tuple[torch.Tensor, float]]]] = queue.Queue()
        threading.Thread(target=self._run, name="model", daemon=True).start()

    def _run(self) -> None:
        with torch.no_grad():
            while True:
                batch, future = self.jobs.get()
                try:
                    t0 = time.perf_counter()
                    prediction = self.model(batch)
                    future.set_result((prediction, (time.perf_counter() - t0) * 1e3))
                except Exception as exc:
                    future.set_exception(exc)

    def __call__(self, batch: torch.Tensor) -> tuple[torch.Tensor, float]:
        future: Future[tuple[torch.Tensor, float]] = Future()
        self.jobs.put((batch, future))
        return future.result()


def in_request_thread(model: torch.nn.Module) -> Callable[[torch.Tensor], tuple[torch.Tensor, float]]:
    lock = threading.Lock()

    def predict(batch: torch.Tensor) -> tuple[torch.Tensor, float]:
        with lock, torch.no_grad():
            t0 = time.perf_counter()
            prediction = model(batch)
            return prediction, (time.perf_counter() - t0) * 1e3

    return predict


def serve(model_name: str, imgsz: int, port: int, threads: int, per_request: bool) -> None:
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = DetectionModel(model_name, verbose=False).fuse(verbose=False).eval()
    predict = in_request_thread(model) if per_request else ModelThread(model)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/hooks":
                self._answer(200, json.dumps(hook_state(model)).encode(), "application/json")
                return
            self._answer(200, b"ok\n" if self.path == "/health" else b"POST a JPEG to /detect\n", "text/plain")

        def do_POST(self) -> None:
            started = time.perf_counter()
            if self.path == "/agent":
                self._agent(self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode().strip())
                return
            if self.path != "/detect":
                self._answer(404, b"not found\n", "text/plain")
                return
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            image = cv2.imdecode(np.frombuffer(body, dtype=np.uint8), cv2.IMREAD_COLOR)
            if image is None:
                self._answer(400, b"not an image\n", "text/plain")
                return
            prediction, inference_ms = predict(letterbox(image, imgsz))
            boxes = non_max_suppression(prediction, conf_thres=0.25)[0]
            answer = {
                "boxes": len(boxes),
                "inference_ms": inference_ms,
                "request_ms": (time.perf_counter() - started) * 1e3,
            }
            self._answer(200, json.dumps(answer).encode(), "application/json")

        def _agent(self, action: str) -> None:
            import hwprof.agent

            if action not in ("start", "stop"):
                self._answer(400, b"POST start or stop to /agent\n", "text/plain")
                return
            socket = str(hwprof.agent.start()) if action == "start" else None
            if action == "stop":
                hwprof.agent.stop()
            self._answer(200, json.dumps({"agent": action, "socket": socket}).encode(), "application/json")

        def _answer(self, code: int, body: bytes, kind: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"listening on http://127.0.0.1:{server.server_address[1]} (pid {os.getpid()})", flush=True)
    server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="yolov8n.yaml", help="an ultralytics model's YAML (random weights, seeded)")
    parser.add_argument("--imgsz", type=int, default=320)
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    parser.add_argument("--threads", type=int, default=1, help="torch's threads")
    parser.add_argument("--per-request", action="store_true", help="call the model in each request's own thread")
    args = parser.parse_args()
    serve(args.model, args.imgsz, args.port, args.threads, args.per_request)


if __name__ == "__main__":
    main()
