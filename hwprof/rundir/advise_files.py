"""What `hwprof advise` leaves in a run directory: advice.json (the advice table, rewritten after every
candidate; hwprof.analysis.advice.table.load_advice reads it through RunData's advice_path), and in its advise/
work folder each worker's spec (what to measure) and out file (what it measured: the schema's AdviseResult)."""

from __future__ import annotations

import json
from pathlib import Path

from hwprof.core.atomic import atomic_write_text
from hwprof.rundir.reader import advice_path
from hwprof.schema.advise_result import AdviseResult, AdviseSpec
from hwprof.schema.check import RunDirError, found, read_json
from hwprof.schema.codec import JsonObject


def write_advice(run_dir: Path, advice: JsonObject) -> Path:
    """advice.json (Advice.to_dict()), replaced atomically: a stop between candidates keeps every row finished."""
    path = advice_path(run_dir)
    atomic_write_text(path, json.dumps(advice, indent=1))
    return path


def write_advise_spec(path: Path, spec: AdviseSpec) -> None:
    atomic_write_text(path, json.dumps(spec.to_json(), indent=1))


def read_advise_spec(path: Path) -> AdviseSpec:
    """A worker's spec; RunDirError (one line naming the file) when it is missing, not JSON or has no "out"."""
    spec = read_json(path)
    if not isinstance(spec, dict) or not isinstance(spec.get("out"), str):
        what = found(spec.get("out")) if isinstance(spec, dict) else found(spec)
        raise RunDirError(f'{path}: field "out" must be a string (the worker\'s out file), found {what}')
    return AdviseSpec.from_json(spec, str(path))


def write_advise_result(path: Path, result: AdviseResult) -> None:
    """A worker's out file: its figures (hwprof.advisor.paired_worker.run) or {"error": why it failed}."""
    atomic_write_text(path, json.dumps(result.to_json()))


def read_advise_result(path: Path) -> AdviseResult:
    """A worker's out file as the schema's AdviseResult; an empty record when it wrote none or it cannot be
    read (the worker's exit says why), RunDirError (one line naming the file and the field) when damaged."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        doc = {}
    return AdviseResult.from_json(doc if isinstance(doc, dict) else {}, str(path))
