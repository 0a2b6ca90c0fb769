"""`hwprof sweep --resume DIR`: the sweep's options kept in DIR, and runs of interrupted points kept aside.

The options are written to DIR/sweep_plan.json before the first point starts, so that a sweep stopped at
any moment (Ctrl-C, a lost driver) can be resumed with nothing but its folder. Points whose run is complete
are reused; an interrupted point's incomplete run directory is renamed, never deleted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hwprof.atomic import atomic_write_text

PLAN_FILE = "sweep_plan.json"


def write_plan(out_root: Path, plan: dict[str, Any], ray: dict[str, Any] | None = None) -> Path:
    path = Path(out_root) / PLAN_FILE
    atomic_write_text(path, json.dumps({"plan": plan, "ray": ray}, indent=1, default=str) + "\n")
    return path


def read_plan(out_root: Path | str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(the SweepPlan's fields, the Ray options or None) a sweep in out_root was started with."""
    path = Path(out_root) / PLAN_FILE
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(
            f"--resume {out_root}: no {PLAN_FILE} there (not a sweep folder, or one older than --resume)"
        ) from None
    except (OSError, ValueError) as exc:
        raise ValueError(f"--resume {out_root}: {PLAN_FILE} cannot be read: {exc}") from exc
    return dict(doc.get("plan") or {}), doc.get("ray")


def set_aside(run_dir: Path) -> Path:
    """Rename an incomplete run directory to <name>.incomplete-N (the first N free) and return the new path."""
    n = 1
    while (target := run_dir.with_name(f"{run_dir.name}.incomplete-{n}")).exists():
        n += 1
    return run_dir.rename(target)
