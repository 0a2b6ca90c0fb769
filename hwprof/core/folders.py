"""A folder a command writes into (--out, --results), made where missing, with the system's refusals turned into
one line naming the option: a symbolic link that leads back to itself or nowhere, a file in the way, a folder
that cannot be written. Before, a link loop as `--out` said "[Errno 17] File exists: loop" (pathlib's exists()
answers False for a loop, then mkdir finds the name taken)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from hwprof.core.uservalue import shown


def make_folder(path: Path, option: str) -> Path:
    """`path` made (with its parents) unless it is a folder already; ValueError (one line) where it cannot be."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        return path
    except FileExistsError:
        pass
    except OSError as exc:
        raise ValueError(_refusal(path, option, exc)) from None
    if path.is_symlink() and not path.exists():
        raise ValueError(f"{option} {shown(str(path))}: {LOOP}")
    raise ValueError(f"{option} {shown(str(path))} exists and is not a folder")


def check_folder(path: Path, option: str) -> None:
    """make_folder's refusals, in its words, said before anything is made or measured (a collect probes its
    collectors first: seconds before its folder was made and refused): a link in the path that loops or leads
    nowhere, a file in the way, a folder or nearest existing parent that cannot be written. ValueError (one
    line); nothing is made (make_folder makes it later)."""
    try:
        target = path
        if not path.is_dir():
            for part in (path, *path.parents):
                if part.is_symlink() and not part.exists():
                    raise ValueError(f"{option} {shown(str(path))}: {LOOP}")
                if part.exists():
                    break
            if path.exists():
                raise ValueError(f"{option} {shown(str(path))} exists and is not a folder")
            target = next((p for p in path.parents if p.exists()), Path.cwd())
            if not target.is_dir():
                raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
        # the effective uid's access, as mkdir has it (a collect run with a real uid of its own, effective root)
        if not os.access(target, os.W_OK | os.X_OK, effective_ids=os.access in os.supports_effective_ids):
            raise OSError(errno.EACCES, os.strerror(errno.EACCES))
    except OSError as exc:
        raise ValueError(_refusal(path, option, exc)) from None


LOOP = "a symbolic link in it leads back to itself or nowhere; fix: point it at a folder"


def _refusal(path: Path, option: str, exc: OSError) -> str:
    named = f"{option} {shown(str(path))}"
    if exc.errno == errno.ELOOP:
        return f"{named}: {LOOP}"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"{named} cannot be made or written ({exc.strerror}); fix: give a folder you can write"
    return f"{named} cannot be made ({exc.strerror or exc})"
