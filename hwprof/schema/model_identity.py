"""The model's identity and parameter counts, declared once for the two files that hold them: model.json
(hwprof.schema.pass_files.ModelInfo, written by the pass that built the model) and run.json's "model"
(hwprof.schema.run.ModelDoc, copied from model.json when the run finishes). Both files keep these keys at their top
level, so the two records inherit the fields rather than nest them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from hwprof.schema.bounds import Count
from hwprof.schema.codec import JsonObject, Record
from hwprof.schema.model_init import InitDoc


@dataclass(kw_only=True)
class ModelIdentity(Record):
    """What model was built, from which weights, and how many parameters it has."""

    name: str | None = None
    family: str | None = None
    weights: str | JsonObject | None = None
    """"random init", "not recorded" (an imported run), or what was loaded: path, format, sha256, tensors
    (hwprof.workload.zoo)."""
    random_init: bool | None = None
    init: InitDoc | None = None
    """Without --weights: how the seeded init was made to keep its signal (run.json's is model.json's)."""
    params: Count | None = None
    params_fused: Count | None = None

    def identity(self, without: tuple[str, ...] = ()) -> dict[str, Any]:
        """These fields' values by name (those in `without` left out), in their declared order: the keyword
        values of another ModelIdentity's `of` that holds the same model."""
        skip = {"json_extra", "json_order", *without}
        return {f.name: getattr(self, f.name) for f in fields(ModelIdentity) if f.name not in skip}
