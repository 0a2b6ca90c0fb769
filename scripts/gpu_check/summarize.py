"""One screen of a run's run.json: each pass (status, how its worker began, wall time, error) and each
collector's status with its reason; the fork-with-CUDA question answered from it."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(run_dir: str) -> int:
    path = Path(run_dir) / "run.json"
    if not path.exists():
        print(f"no {path}")
        return 1
    run = json.loads(path.read_text())
    print(f"run status: {run.get('status')}; config device: {run.get('config', {}).get('device')}")
    passes = run.get("passes", {})
    for name, p in passes.items():
        err = (p.get("error") or "")[:200]
        print(
            f"pass {name:10} status={p.get('status')} worker_start={p.get('worker_start')} wall_s={p.get('wall_s')} "
            f"rc={p.get('returncode')} collectors={p.get('collectors')} forward_p50_ms={p.get('forward_p50_ms')}"
            + (f" error={err!r}" if err else "")
        )
        shapes = (p.get("inputs") or {}).get("shapes") or {}
        measured = sum(v.get("measured", 0) for v in shapes.values())
        print(f"  measured {measured}, phases {p.get('phases')}")
        if p.get("stopping"):
            print(f"  stopping: {p['stopping'].get('text')}")
    for name, c in run.get("collectors", {}).items():
        reason = (c.get("reason") or "")[:160]
        print(f"collector {name:15} {c.get('status'):12} pass={c.get('pass')} {reason}")
    gpu_forked = [n for n, p in passes.items() if p.get("worker_start") == "forked" and p.get("status") == "ok"]
    device = run.get("config", {}).get("device")
    print(f"passes forked from the zygote that ended ok on --device {device}: {gpu_forked}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/r1"))
