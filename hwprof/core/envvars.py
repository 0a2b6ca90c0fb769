"""Environment variables hwprof reads: the cache folder, and the one error for an unusable override.

An override the user set and that cannot be used is an error naming the variable (EnvVarError, a
ValueError: exit 2, one line), never a silent fall-back to the default it was set to replace.

Bottom layer: no hwprof imports.
"""

from __future__ import annotations

import os
from pathlib import Path


class EnvVarError(ValueError):
    """An environment variable is set to something hwprof cannot use; the message names it and the fix."""


def cache_home() -> Path:
    """$XDG_CACHE_HOME, or ~/.cache when it is unset, empty or relative: the XDG Base Directory spec says
    a relative path is invalid and must be ignored (it would put a cache folder in the working directory)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    return Path(base) if os.path.isabs(base) else Path.home() / ".cache"


def hwprof_cache() -> Path:
    """Where every hwprof cache lives: CPU and GPU peaks, the model catalogue, the unpacked valgrind."""
    return cache_home() / "hwprof"
