"""Whether --weights names something that can be a checkpoint, before it is opened (no torch here: the
command line checks it before any pass runs, and the loader checks it again where the pass opens it).

A directory, or a device such as /dev/zero (which would be read for ever), is named as what it is, with the
fix; never "does not exist".
"""

from __future__ import annotations

import os

from hwprof.core.uservalue import path_problem

WEIGHTS_FIX = "pass the path of a .pt checkpoint, or omit --weights for a random init"


def weights_file_problem(path: str | os.PathLike[str]) -> str | None:
    """Why `path` cannot be a checkpoint file ("is a directory, not a checkpoint file"), or None."""
    problem = path_problem(path)
    return f"{problem}, not a checkpoint file" if problem else None
