"""What hwprof's agent costs a service while nobody is attached: request time with the agent started and idle
against the same process with it stopped, in ABBA blocks, in one run.

One copy of scripts/detect_service.py (one torch thread), sent the same JPEG one request at a time, in blocks of
--block requests: agent off, on, on, off, ... The agent is started and stopped inside the service between blocks
(its POST /agent endpoint: hwprof.agent.start() and stop()), so both states share one process, its memory layout
and the host's moments. Two copies of the service differ by themselves: two plain copies gave 1.033x by their start
order alone (2026-11-29), more than the 1.01x asked of the agent. Printed: each state's request and model p50, the
ratio on/off with a bootstrap 95% interval over the ABBA groups, the process's threads in each state, and whether
the interval lies within --within. --autostart: the service is started with HWPROF_AGENT=1 (the start-up hook that
hwprof's wheel installs), and the agent it started is the one switched off first.

    python scripts/bench_agent_idle.py --requests 400 --imgsz 320
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from attach_service import Service, image_bytes, start_service  # noqa: E402

Group = tuple[list[float], list[float]]
"""One ABBA group's request times: (agent off, agent on)."""


def bootstrap_ratio(groups: list[Group], resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% interval of median(on) / median(off) over resampled ABBA groups (a group's requests stay together: the
    host's moments make neighbouring requests alike)."""
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        chosen = [groups[rng.randrange(len(groups))] for _ in groups]
        on = [t for _, times in chosen for t in times]
        off = [t for times, _ in chosen for t in times]
        ratios.append(statistics.median(on) / statistics.median(off))
    ratios.sort()
    return ratios[int(0.025 * resamples)], ratios[int(0.975 * resamples) - 1]


def threads(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/task").iterdir()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=400, help="requests in each state")
    parser.add_argument("--block", type=int, default=10, help="requests between two switches of the agent")
    parser.add_argument("--imgsz", type=int, default=320)
    parser.add_argument("--within", type=float, default=1.01, help="the cost asked: the interval's upper end")
    parser.add_argument(
        "--autostart", action="store_true", help="the service started with HWPROF_AGENT=1 (the start-up hook)"
    )
    args = parser.parse_args()
    service = start_service(args.imgsz, agent=args.autostart)
    try:
        return bench(service, args.requests, args.block, args.within, args.autostart)
    finally:
        service.stop()


def bench(service: Service, requests: int, block: int, within: float, started: bool) -> int:
    body = image_bytes()
    for _ in range(20):  # warm up
        service.detect(body)
    if started:  # HWPROF_AGENT=1 started it with the interpreter: the first block is the one without
        service.agent("stop")
    plain_threads = threads(service.pid)
    times: dict[bool, list[float]] = {False: [], True: []}
    model: dict[bool, list[float]] = {False: [], True: []}
    groups: list[Group] = []
    agent_threads, state = 0, False
    for _ in range(max(requests // (2 * block), 1)):
        group: dict[bool, list[float]] = {False: [], True: []}
        for on in (False, True, True, False):
            if on != state:
                service.agent("start" if on else "stop")
                state = on
                if on:
                    agent_threads = threads(service.pid)
            for _ in range(block):
                answer = service.detect(body)
                group[on].append(answer["request_ms"])
                times[on].append(answer["request_ms"])
                model[on].append(answer["inference_ms"])
        groups.append((group[False], group[True]))
    service.agent("stop")
    for on in (False, True):
        print(
            f"agent {'on ' if on else 'off'}: {len(times[on])} requests, request p50 "
            f"{statistics.median(times[on]):.2f} ms, model p50 {statistics.median(model[on]):.2f} ms"
        )
    ratio = statistics.median(times[True]) / statistics.median(times[False])
    low, high = bootstrap_ratio(groups)
    print(
        f"on / off request p50: {ratio:.4f}x (95% bootstrap interval {low:.4f}-{high:.4f} over {len(groups)} "
        f"ABBA groups of {block}-request blocks)"
    )
    print(f"the service's threads: {plain_threads} with the agent stopped, {agent_threads} with it started")
    verdict = "within" if high <= within else "NOT shown within"
    print(f"the idle agent's cost is {verdict} {within}x (the interval's upper end {high:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
