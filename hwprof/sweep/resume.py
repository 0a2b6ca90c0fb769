"""`hwprof sweep --resume DIR`: the sweep's options kept in DIR, and runs of interrupted points kept aside.

The options are written to DIR/sweep_plan.json before the first point starts, so that a sweep stopped at
any moment (Ctrl-C, a lost driver) can be resumed with nothing but its folder. Points whose run is complete
are reused; an interrupted point's incomplete run directory is renamed, never deleted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hwprof.core.atomic import atomic_write_text
from hwprof.schema.check import Field, RunDirError, check_fields, read_json_object

PLAN_FILE = "sweep_plan.json"
PLAN_FIELDS = (Field("plan", (dict,), "an object", required=True), Field("ray", (dict,), "an object", nullable=True))
SWEEP_PLAN_FIELDS = (
    Field("models", (list,), "a list of model names", required=True),
    Field("threads", (list,), "a list of thread counts"),
    Field("batch", (list,), "a list of batch sizes"),
    Field("out_root", (str,), "a path"),
)
"""What resuming relies on in sweep_plan.json (the rest is SweepPlan's own fields, checked by SweepPlan.validate)."""


def write_plan_json(out_root: Path, plan: dict[str, Any], ray: dict[str, Any] | None = None) -> Path:
    """DIR/sweep_plan.json from SweepPlan.to_dict() and RayOptions.to_dict() (None for a local sweep)."""
    path = Path(out_root) / PLAN_FILE
    atomic_write_text(path, json.dumps({"plan": plan, "ray": ray}, indent=1, default=str) + "\n")
    return path


def read_plan_json(out_root: Path | str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """sweep_plan.json's objects, checked: (the SweepPlan's fields, the Ray options or None) a sweep in
    out_root was started with (hwprof.sweep.points.plan_from_file makes the SweepPlan)."""
    path = Path(out_root) / PLAN_FILE
    if not path.exists():
        raise ValueError(f"--resume {out_root}: no {PLAN_FILE} there (not a sweep folder, or one older than --resume)")
    doc = read_json_object(path)
    check_fields(doc, PLAN_FIELDS, str(path))
    plan = doc["plan"]
    check_fields(plan, SWEEP_PLAN_FIELDS, str(path), "plan.")
    if not plan["models"] or not all(isinstance(m, str) for m in plan["models"]):
        raise RunDirError(f'{path}: field "plan.models" must be a non-empty list of model names')
    return dict(plan), doc.get("ray")


def set_aside(run_dir: Path) -> Path:
    """Rename an incomplete run directory to <name>.incomplete-N (the first N free) and return the new path."""
    n = 1
    while (target := run_dir.with_name(f"{run_dir.name}.incomplete-{n}")).exists():
        n += 1
    return run_dir.rename(target)
