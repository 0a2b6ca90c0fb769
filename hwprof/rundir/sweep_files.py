"""A sweep's own files in its folder besides its table (writer.write_sweep_files): the transfer record of a
cluster sweep (ray_transfer.json: per point, what moving its run directory back cost), appended to when
the sweep is resumed."""

from __future__ import annotations

import json
from pathlib import Path

from hwprof.core.atomic import atomic_write_text
from hwprof.rundir.names import SWEEP_TRANSFER_JSON
from hwprof.schema.codec import JsonObject


def read_transfers(out_root: Path) -> list[JsonObject]:
    """The transfer record of the sweep being resumed, kept whole; none when there is none. An unreadable one
    is set aside (renamed *.unreadable) so that the resumed sweep writes a fresh one."""
    path = out_root / SWEEP_TRANSFER_JSON
    if not path.exists():
        return []
    try:
        found = json.loads(path.read_text())
        if isinstance(found, list):
            return found
    except (OSError, ValueError):
        pass
    path.rename(path.with_name(path.name + ".unreadable"))
    return []


def write_transfers(out_root: Path, transfers: list[JsonObject]) -> None:
    atomic_write_text(out_root / SWEEP_TRANSFER_JSON, json.dumps(transfers, indent=1) + "\n")
