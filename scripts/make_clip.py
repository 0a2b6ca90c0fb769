"""A test clip from the two photos the ultralytics wheel ships (bus.jpg, zidane.jpg): a slow pan across each, so
that the codec has moving content to decode and encode, written with cv2.VideoWriter (mp4v).

    python scripts/make_clip.py clip.mp4                     # 640x480, 60 frames at 30 fps (issue 41's measurement)
    python scripts/make_clip.py clip.mp4 --size 1280x720 --frames 120
    hwprof collect --model yolov7 --imgsz 320 --images clip.mp4 --annotate clip-detected.mp4

The first half of the frames pans across bus.jpg, the second across zidane.jpg (each scaled to cover the frame
with a 20% margin to pan over).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="the clip to write (.mp4)")
    parser.add_argument("--size", default="640x480", help="WIDTHxHEIGHT (default 640x480)")
    parser.add_argument("--frames", type=int, default=60)
    parser.add_argument("--fps", type=float, default=30.0)
    args = parser.parse_args()

    import cv2
    import numpy as np

    from hwprof.workload.images import DEFAULT_IMAGES, default_image_dir

    width, height = (int(v) for v in args.size.lower().split("x"))
    if args.frames < 2:
        print("make_clip: --frames must be at least 2", file=sys.stderr)
        return 2
    folder = default_image_dir()
    photos = [cv2.imread(str(folder / name)) for name in DEFAULT_IMAGES]
    writer = cv2.VideoWriter(str(args.out), cv2.VideoWriter_fourcc(*"mp4v"), args.fps, (width, height))
    if not writer.isOpened():
        print(f"make_clip: OpenCV cannot write {args.out}", file=sys.stderr)
        return 2
    half = args.frames // 2
    for i in range(args.frames):
        photo = photos[0 if i < half else 1]
        scale = max(width / photo.shape[1], height / photo.shape[0]) * 1.2
        big = cv2.resize(photo, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
        k, n = (i, half) if i < half else (i - half, args.frames - half)
        t = k / max(n - 1, 1)
        x, y = int(t * (big.shape[1] - width)), int(t * (big.shape[0] - height))
        writer.write(np.ascontiguousarray(big[y : y + height, x : x + width]))
    writer.release()
    print(f"{args.out}: {width}x{height}, {args.frames} frames at {args.fps:g} fps (mp4v)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
