"""The official detect.py run as `python -m yolov7.detect ARGS` runs it, with the calls of its model counted.

    python tests/official/counted_detect.py ARGS...   (the environment's COUNTED_CALLS: the JSON lines file)

Each call of a YOLOv7 `Model` (the official class, yolov7.models.yolo) is counted with the depth of the model's
calls open around it, by wrapping the class's `__call__` (no hook on the model, nothing in detect.py changed):
depth 1 is the program's own call; depth 2 or more is a call made inside one of the program's calls (a profiler's
own forward would be one); a call after detect.py's main ended or was stopped is counted apart. At the process's
exit one JSON line is appended to COUNTED_CALLS: the hwprof pass the process ran ("alone" outside hwprof, read
from /proc/self/cmdline, which a program's sys.argv does not change) and the counts.
"""

from __future__ import annotations

import atexit
import json
import os
import runpy
import sys
from pathlib import Path
from typing import Any

from yolov7.models.yolo import Model

COUNTS = {"program": 0, "nested": 0, "after": 0}
_state = {"depth": 0, "ended": False}


def _counted(call: Any) -> Any:
    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        depth = _state["depth"] = _state["depth"] + 1
        COUNTS["after" if _state["ended"] and depth == 1 else "program" if depth == 1 else "nested"] += 1
        try:
            return call(self, *args, **kwargs)
        finally:
            _state["depth"] -= 1

    return counted


def _pass_name() -> str:
    """The hwprof pass of this process (`python -P -m hwprof.session.worker RUN_DIR PASS ...`), or "alone"."""
    argv = Path("/proc/self/cmdline").read_bytes().decode().split("\0")
    if "hwprof.session.worker" in argv:
        return argv[argv.index("hwprof.session.worker") + 2]
    return "alone"


def _write() -> None:
    with open(os.environ["COUNTED_CALLS"], "a") as out:
        out.write(json.dumps({"pass": _pass_name(), **COUNTS}) + "\n")


def main() -> None:
    Model.__call__ = _counted(Model.__call__)
    atexit.register(_write)
    sys.argv = ["detect.py", *sys.argv[1:]]
    try:
        runpy.run_module("yolov7.detect", run_name="__main__", alter_sys=True)
    finally:
        _state["ended"] = True


if __name__ == "__main__":
    main()
