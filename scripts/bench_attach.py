"""What `hwprof attach` does to a service's requests: their time before, during each window, between windows and
after, and the attach's wall time.

scripts/detect_service.py is started with HWPROF_AGENT=1 (--imgsz, one torch thread) and sent a JPEG at --rate
requests per second from this process, one at a time, for --before seconds, then through a default `hwprof attach`
(--calls), then for --after seconds. Each answer keeps the service's own request time (its handler's) and model
time; each window's span is read from its pass's markers (CLOCK_MONOTONIC, the clock this process stamps its
requests with). Printed: per phase, the requests, their p50 and p90 request and model times, and the ratio of each
p50 to the one before the attach; failed requests (there must be none).

    python scripts/bench_attach.py --imgsz 320 --rate 4 --calls 20
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from attach_service import Load, start_service  # noqa: E402


def windows(run: Path) -> list[tuple[str, int, int]]:
    """(pass, first marker ns, last marker ns) of each pass that left markers, in order."""
    out = []
    for pass_dir in sorted((run / "passes").iterdir(), key=lambda p: p.stat().st_mtime):
        markers = pass_dir / "markers.jsonl"
        if not markers.is_file():
            continue
        stamps = [json.loads(line)[3] for line in markers.read_text().splitlines() if line.strip()]
        if stamps:
            out.append((pass_dir.name, min(stamps), max(stamps)))
    return sorted(out, key=lambda w: w[1])


def phases(run: Path, attach_start: float, attach_end: float) -> list[tuple[str, float, float]]:
    """Named intervals (time.monotonic seconds): before, each window, between windows, after."""
    out = [("before", 0.0, attach_start)]
    last = attach_start
    for name, first, end in windows(run):
        out.append(("between" if len(out) > 1 else "start-up", last, first / 1e9))
        out.append((f"window {name}", first / 1e9, end / 1e9))
        last = end / 1e9
    out.append(("closing", last, attach_end))
    out.append(("after", attach_end, float("inf")))
    return out


def p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=10)[int(q * 10) - 1] if len(values) >= 10 else max(values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--imgsz", type=int, default=320)
    parser.add_argument("--rate", type=float, default=4.0)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--before", type=float, default=20.0)
    parser.add_argument("--after", type=float, default=20.0)
    parser.add_argument("--nice", type=int, default=0, help="run `hwprof attach` at this niceness")
    args = parser.parse_args()
    service = start_service(args.imgsz, agent=True)
    load = Load(service, rate=args.rate).start()
    try:
        time.sleep(args.before)
        out = Path(tempfile.mkdtemp(prefix="bench-attach-")) / "run"
        command = ["--calls", str(args.calls), "--out", str(out)]
        started = time.monotonic()
        done = subprocess.run(
            ["nice", "-n", str(args.nice), sys.executable, "-m", "hwprof", "attach", str(service.pid), *command],
            capture_output=True,
            text=True,
        )
        ended = time.monotonic()
        time.sleep(args.after)
    finally:
        load.stop()
        service.stop()
    print(f"attach: exit {done.returncode}, {ended - started:.1f} s wall; run in {out}")
    if done.returncode not in (0, 1):
        print(done.stderr[-2000:])
    base: dict[str, float] = {}
    print(f"{'phase':18} {'requests':>8} {'request p50':>12} {'p90':>8} {'model p50':>10} {'p90':>8}  vs before")
    for name, start, end in phases(out, started, ended):
        chosen = [a for a in load.answers if start <= a["at"] < end]
        if not chosen:
            continue
        request = [a["request_ms"] for a in chosen]
        model = [a["inference_ms"] for a in chosen]
        row = (statistics.median(request), p(request, 0.9), statistics.median(model), p(model, 0.9))
        base = base or {"request": row[0], "model": row[2]}
        ratio = f"{row[0] / base['request']:.3f}x request, {row[2] / base['model']:.3f}x model"
        print(f"{name:18} {len(chosen):8} {row[0]:10.2f}ms {row[1]:6.2f}ms {row[2]:8.2f}ms {row[3]:6.2f}ms  {ratio}")
    print(f"failed requests: {len(load.failures)}" + (f" (first: {load.failures[0]})" if load.failures else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
