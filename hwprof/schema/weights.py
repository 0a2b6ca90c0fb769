"""The weights a run loaded, as model.json and run.json's `model.weights` hold them (hwprof.workload.weights.
WeightsInfo as written). run.json keeps the object whole (`ModelDoc.weights`, a string for a random init or a
program's own model); a reader that looks inside reads it through WeightsDoc."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hwprof.schema.bounds import Count
from hwprof.schema.codec import Record


@dataclass(kw_only=True)
class WeightsDoc(Record):
    path: str | None = None
    format: str | None = None
    """"ultralytics", "yolov7-official" or "state_dict"."""
    dtype: str | None = None
    """The floating-point dtype the file stores its tensors in."""
    sha256: str | None = None
    num_tensors: Count | None = None
    nc: Count | None = None
    """The class count the checkpoint records (None: it records none)."""
    fused: bool | None = None
    notes: list[Any] = field(default_factory=list)
    source: str | None = None
    """Where a trained model fetched by name came from, its licence and what it detects (one sentence)."""
    origin: str | None = None
    """The short form of `source`: the registry wheel and its licence (absent in older runs)."""
    names: dict[str, str] | None = None
    """Class id (as a JSON key) -> name, as the checkpoint records them (absent: it records none, or an older run)."""

    @classmethod
    def of_model(cls, weights: object) -> WeightsDoc | None:
        """The record of run.json's or model.json's `weights` value; None for a string ("random init", "the
        program's own") or nothing."""
        if not isinstance(weights, dict):
            return None
        return cls.from_json(weights, "run.json", "model.weights.")

    @property
    def class_names(self) -> list[str]:
        """The class names in id order (empty when the file records none)."""
        if not self.names:
            return []
        return [name for _, name in sorted(self.names.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else -1)]

    @property
    def classes(self) -> int | None:
        """The class count: the names', else the recorded nc."""
        return len(self.names) if self.names else self.nc
