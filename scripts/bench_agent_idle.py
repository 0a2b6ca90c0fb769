"""What hwprof's agent costs a service while nobody is attached: request latency with HWPROF_AGENT=1 against without,
paired, in one run.

Two copies of scripts/detect_service.py (the same model and size, one torch thread each), one started with
HWPROF_AGENT=1 and one without, are sent the same JPEG in turn, in ABBA order (A, B, B, A, ...), one request at a
time, so that both see the same host at the same moments. Printed: each copy's median request time (the service's
own, in its handler) and its model time, and the ratio of the agent's to the plain one with a bootstrap 95%
interval over the pairs. Also, for the agent's copy only: its threads (the agent's one) and whether its socket
exists. Twice, each copy started first once: two plain copies differ by the order they started in (1.033x, the
second the slower, 2026-11-29), so the agent's cost is the geometric mean of the two orders' ratios.

    python scripts/bench_agent_idle.py --requests 400 --imgsz 320
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from attach_service import Service, image_bytes, start_service  # noqa: E402


def bootstrap_ratio(a: list[float], b: list[float], resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% interval of median(a) / median(b) over paired resamples."""
    rng = random.Random(seed)
    pairs = list(zip(a, b, strict=True))
    ratios = []
    for _ in range(resamples):
        sample = [pairs[rng.randrange(len(pairs))] for _ in pairs]
        ratios.append(statistics.median(x for x, _ in sample) / statistics.median(y for _, y in sample))
    ratios.sort()
    return ratios[int(0.025 * resamples)], ratios[int(0.975 * resamples) - 1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=400, help="requests to each copy")
    parser.add_argument("--imgsz", type=int, default=320)
    args = parser.parse_args()
    ratios = []
    for agent_first in (False, True):  # each copy started first once: the second started was the slower process
        print(f"the agent's copy started {'first' if agent_first else 'second'}:")
        if agent_first:
            agent, plain = start_service(args.imgsz, agent=True), start_service(args.imgsz, agent=False)
        else:
            plain, agent = start_service(args.imgsz, agent=False), start_service(args.imgsz, agent=True)
        try:
            ratios.append(bench(plain, agent, args.requests))
        finally:
            plain.stop()
            agent.stop()
    both = (ratios[0] * ratios[1]) ** 0.5
    print(f"the agent's cost, each start order once (geometric mean of the two ratios): {both:.4f}x")
    return 0


def bench(plain: Service, agent: Service, requests: int) -> float:
    body = image_bytes()
    for service in (plain, agent):  # warm both up
        for _ in range(10):
            service.detect(body)
    times: dict[str, list[float]] = {"plain": [], "agent": []}
    model: dict[str, list[float]] = {"plain": [], "agent": []}
    order = [("plain", plain), ("agent", agent), ("agent", agent), ("plain", plain)]
    for i in range(requests * 2):
        name, service = order[i % 4]
        answer = service.detect(body)
        times[name].append(answer["request_ms"])
        model[name].append(answer["inference_ms"])
    low, high = bootstrap_ratio(times["agent"], times["plain"])
    ratio = statistics.median(times["agent"]) / statistics.median(times["plain"])
    for name in ("plain", "agent"):
        print(
            f"{name:6} {len(times[name])} requests: request p50 {statistics.median(times[name]):.2f} ms, "
            f"model p50 {statistics.median(model[name]):.2f} ms"
        )
    print(f"agent / plain request p50: {ratio:.4f}x (95% bootstrap interval {low:.4f}-{high:.4f}, ABBA pairs)")
    from hwprof.agent.paths import socket_path

    threads = len(list(Path(f"/proc/{agent.pid}/task").iterdir()))
    plain_threads = len(list(Path(f"/proc/{plain.pid}/task").iterdir()))
    listening = socket_path(agent.pid, os.getuid()).exists()
    print(f"threads: agent's copy {threads}, plain copy {plain_threads}; the agent's socket there: {listening}")
    return ratio


if __name__ == "__main__":
    sys.exit(main())
