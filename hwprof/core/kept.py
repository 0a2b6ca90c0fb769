"""Facts of this environment kept in hwprof's cache under a key made of everything that decides them: what a
probe found (a child process that imports torch, or runs Scalene's CLI: seconds of every collect's plan) read back
while the key holds. A key is a short hash of its parts; any change of a part is another file."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from hwprof.schema.check import RunDirError
from hwprof.schema.codec import JsonObject

T = TypeVar("T")

CACHE_VERSION = 2


def key_of(parts: Sequence[str]) -> str:
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:16]


def kept(
    cache: Path | None,
    name: str,
    key: str | None,
    compute: Callable[[], T],
    *,
    load: Callable[[JsonObject], T],
    dump: Callable[[T], JsonObject],
    keep: Callable[[T], bool] = lambda _: True,
) -> T:
    """What `compute` says, kept in `cache` as `name-KEY.json` (`dump`'s JSON object) and read back with `load`
    while the key holds; else computed, and written where `keep` says so (a probe that failed may succeed next
    time). Without a cache or a key, computed. A file that cannot be read, parsed or loaded, or a folder that
    cannot be written, is passed over: the value is computed."""
    if cache is None or key is None:
        return compute()
    path = cache / f"{name}-{key}.json"
    try:
        data = json.loads(path.read_text())
        if data.get("version") == CACHE_VERSION and data.get("key") == key:
            return load(data["value"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RunDirError):
        pass
    value = compute()
    if not keep(value):
        return value
    try:
        from hwprof.core.atomic import atomic_write_text

        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({"version": CACHE_VERSION, "key": key, "value": dump(value)}))
    except (OSError, ValueError):
        pass
    return value
