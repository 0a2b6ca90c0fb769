"""The run directory and its run.json (versioned schema; documented in README.md).

results/<run-id>/
  run.json                 what ran, on what, what was unavailable and why, stage latency
  config.json images.json  the inputs every pass read
  layers.csv summary.json  the layer table joined with every per-layer metric; the report's figures
  passes/<pass>/           per pass: markers.jsonl, model.json, result.json, worker.log,
                           command.json and each collector's artifacts and records

Reports and traces are made from the run directory alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from hwprof.atomic import atomic_write_text
from hwprof.markers import Marker, read_markers
from hwprof.records import MetricTables

SCHEMA_VERSION = 1
RUN_JSON = "run.json"


class RunDirError(ValueError):
    """Not a readable run directory: a one-line message for the user."""


def write_run_json(run_dir: Path, run: dict[str, Any]) -> None:
    """Atomically replace run.json, so a reader never sees half a file."""
    atomic_write_text(run_dir / RUN_JSON, json.dumps(run, indent=1, default=str))


@dataclass
class RunData:
    root: Path
    run: dict[str, Any]
    withheld: frozenset[str] = field(default_factory=frozenset)
    """Collectors whose metric tables analysis set aside (hwprof.analysis.validity)."""

    @classmethod
    def load(cls, root: Path | str) -> RunData:
        root = Path(root)
        path = root / RUN_JSON
        if not path.is_file():
            raise RunDirError(f"{root} is not a run directory (no {RUN_JSON})")
        try:
            run = json.loads(path.read_text())
        except ValueError as exc:
            raise RunDirError(f"{path} is not valid JSON: {exc}") from exc
        version = run.get("schema_version")
        if version != SCHEMA_VERSION:
            raise RunDirError(f"{path} has schema_version {version}; this hwprof reads {SCHEMA_VERSION}")
        return cls(root, run)

    def pass_dir(self, name: str) -> Path:
        return self.root / "passes" / name

    @property
    def pass_names(self) -> list[str]:
        return [p for p in self.run.get("passes", {}) if self.pass_dir(p).is_dir()]

    def pass_result(self, pass_name: str) -> dict[str, Any]:
        """The worker's result.json of a pass ({} when it wrote none)."""
        path = self.pass_dir(pass_name) / "result.json"
        try:
            return dict(json.loads(path.read_text()))
        except (OSError, ValueError):
            return {}

    def markers(self, pass_name: str) -> list[Marker]:
        path = self.pass_dir(pass_name) / "markers.jsonl"
        return read_markers(path) if path.exists() else []

    @cached_property
    def model_info(self) -> dict[str, Any]:
        """model.json of the layers pass if there was one (layer table of --depth), else of any pass."""
        names = sorted(self.pass_names, key=lambda n: n != "layers")
        for name in names:
            path = self.pass_dir(name) / "model.json"
            if path.exists():
                return dict(json.loads(path.read_text()))
        return {}

    def metrics(self) -> dict[str, MetricTables]:
        """collector name -> its metric tables, from every pass."""
        out = {}
        for name in self.pass_names:
            for path in sorted(self.pass_dir(name).glob("*.metrics.json")):
                collector = path.name.removesuffix(".metrics.json")
                if collector not in self.withheld:
                    out[collector] = MetricTables.load(path)
        return out

    def collector(self, name: str) -> dict[str, Any]:
        return dict(self.run.get("collectors", {}).get(name, {}))
