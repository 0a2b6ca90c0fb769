"""Writes that cannot half-happen, and a full disk reported as a failure with the path.

Every output file hwprof writes goes to a temporary name in the same folder (same filesystem, so the
rename is atomic) and is renamed into place with os.replace: a reader, or a run stopped mid-write, sees
the old file or the whole new one, never a truncated one. On any failure the temporary file is removed.
No fsync: the guarantee is against a process that fails or is stopped, not against a power cut.

ENOSPC and EDQUOT become DiskFullError, an OSError that carries the path being written and the free
space left on its filesystem, so that the command line can say where the space ran out (exit 1) instead
of printing "[Errno 28]" as if the user had given a bad path. EFBIG (the file-size limit, `ulimit -f`,
RLIMIT_FSIZE) is the same kind of failure and becomes a DiskFullError that names the limit. CPython ignores
SIGXFSZ, so hwprof's own processes get EFBIG where the signal's default action would kill them with a core;
a tool that is not Python (py-spy, perf) gets the signal, or stops at the limit: `size_limit_cut` tells a
tool's output the limit cut from a damaged one.

Bottom layer: no hwprof imports.
"""

from __future__ import annotations

import errno
import os
import resource
import shutil
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from hwprof.core.procs import live

FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
NEARLY_FULL = 64 * 1024
"""Free bytes below which a tool's failed write that reports no errno (Kineto's trace export) is taken as
a full disk."""


def mount_of(path: Path) -> Path:
    """The mount point of the filesystem that holds path (or would hold it: its nearest existing parent)."""
    p = Path(os.path.abspath(path))
    while not p.exists() and p != p.parent:
        p = p.parent
    while not os.path.ismount(p) and p != p.parent:
        p = p.parent
    return p


def free_bytes(path: Path) -> int | None:
    """Bytes an unprivileged writer can still use on path's filesystem; None when it cannot be read."""
    try:
        return shutil.disk_usage(mount_of(path)).free
    except OSError:
        return None


def human_bytes(n: float | None) -> str:
    if n is None:
        return "unknown space"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover - the loop returns


class DiskFullError(OSError):
    """No space, quota or file-size limit (ulimit -f) left while writing `path`; str() is the one line the CLI
    prints."""

    def __init__(self, path: Path | str, code: int = errno.ENOSPC) -> None:
        self.path = Path(path)
        self.mount = mount_of(self.path)
        self.free = free_bytes(self.path)
        super().__init__(code, os.strerror(code), str(self.path))

    def __str__(self) -> str:
        if self.errno == errno.EFBIG:
            return f"{size_limit_words(file_size_limit())} stopped the write of {self.path}: {SIZE_LIMIT_FIX}"
        what = "no space left on device" if self.errno == errno.ENOSPC else "disk quota exceeded"
        return f"{what} writing {self.path} ({human_bytes(self.free)} free on {self.mount})"

    def __reduce__(self) -> tuple[type[DiskFullError], tuple[str, int]]:
        return (DiskFullError, (str(self.path), self.errno or errno.ENOSPC))


SIZE_LIMIT_COMMAND = "ulimit -f unlimited"
SIZE_LIMIT_FIX = f"raise it with {SIZE_LIMIT_COMMAND}"


def file_size_limit() -> int | None:
    """This process's file-size limit in bytes (RLIMIT_FSIZE's soft limit; `ulimit -f N` is N KiB), None when
    there is none. Children inherit it: a tool that hwprof starts has the same."""
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return None if soft == resource.RLIM_INFINITY else soft


def size_limit_words(limit: int | None) -> str:
    """ "the file-size limit (ulimit -f 512 KiB)"."""
    if limit is None:
        return "the file-size limit"
    if limit % 1024:
        return f"the file-size limit ({limit:,} bytes)"
    return f"the file-size limit (ulimit -f {limit // 1024} KiB)"


def size_limit_cut(path: Path | str, what: str) -> str | None:
    """When `path` (a tool's output that could not be parsed) is as long as the file-size limit allows, the
    reason that says so ("py-spy's output was cut at the file-size limit (ulimit -f 512 KiB): raise it with
    ulimit -f unlimited"), else None: the file is damaged for another reason."""
    limit = file_size_limit()
    try:
        size = os.stat(path).st_size
    except OSError:
        return None
    if limit is None or size < limit:
        return None
    return f"{what} was cut at {size_limit_words(limit)}: {SIZE_LIMIT_FIX}"


def is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in FULL_ERRNOS


def as_disk_full(exc: BaseException, path: Path | str) -> BaseException:
    """exc as a DiskFullError for path when it is ENOSPC/EDQUOT/EFBIG (already one: unchanged), else exc."""
    if isinstance(exc, DiskFullError) or not is_disk_full(exc):
        return exc
    assert isinstance(exc, OSError)
    return DiskFullError(path, exc.errno or errno.ENOSPC)


def removed_folder(folder: Path | str) -> Path | None:
    """The topmost folder of `folder`'s path that no longer exists (folder itself, or the parent someone
    removed with it); None when folder exists."""
    folder = Path(os.path.abspath(folder))
    if folder.is_dir():
        return None
    while not folder.parent.exists() and folder.parent != folder:
        folder = folder.parent
    return folder


class FolderGoneError(FileNotFoundError):
    """The folder hwprof was writing into was removed (or moved away) meanwhile: nothing more can be saved
    there. str() is the one line the CLI prints (exit 1): `what` (e.g. "the run directory") names it."""

    def __init__(self, folder: Path | str, what: str = "the folder", when: str = "while hwprof was writing into it"):
        self.folder = Path(folder)
        self.what = what
        self.when = when
        self.removed = removed_folder(self.folder) or self.folder
        super().__init__(errno.ENOENT, os.strerror(errno.ENOENT), str(self.folder))

    def __str__(self) -> str:
        with_it = "" if self.removed == self.folder else f" (with {self.removed}, which is gone)"
        return f"{self.what} {self.folder} was removed {self.when}{with_it}: nothing more can be saved there"

    def __reduce__(self) -> tuple[type[FolderGoneError], tuple[str, str, str]]:
        return (FolderGoneError, (str(self.folder), self.what, self.when))


def as_folder_gone(exc: BaseException, path: Path) -> BaseException:
    """exc as a FolderGoneError when it is a FileNotFoundError because path's folder no longer exists, else exc."""
    if isinstance(exc, FileNotFoundError) and not isinstance(exc, FolderGoneError) and not path.parent.is_dir():
        return FolderGoneError(path.parent)
    return exc


NOT_WRITABLE_ERRNOS = (errno.EROFS, errno.EACCES, errno.EPERM)


class NotWritableError(OSError):
    """A folder hwprof must write into refuses writes (a read-only mount, no write permission); str() is the
    one line the CLI prints: the folder, why, and the fix the caller knows."""

    def __init__(self, folder: Path | str, code: int = errno.EROFS, fix: str = "") -> None:
        self.folder = Path(folder)
        self.fix = fix
        super().__init__(code, os.strerror(code), str(self.folder))

    def __str__(self) -> str:
        why = "it is on a read-only file system" if self.errno == errno.EROFS else "permission denied"
        return f"{self.folder} cannot be written ({why})" + (f": {self.fix}" if self.fix else "")

    def __reduce__(self) -> tuple[type[NotWritableError], tuple[str, int, str]]:
        return (NotWritableError, (str(self.folder), self.errno or errno.EROFS, self.fix))


def is_not_writable(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in NOT_WRITABLE_ERRNOS


def _tmp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def remove_orphaned_temporaries(folder: Path) -> list[Path]:
    """Remove the temporary files (`_tmp_name`'s) under `folder` of writers that are no longer running: a
    process killed mid-write (SIGKILL: a second stop signal) cannot remove its own. The paths removed."""
    removed = []
    for tmp in folder.rglob(".*.tmp"):
        stem = tmp.name
        while stem.endswith(".tmp"):  # a tool's own temporary of ours (Kineto's <staging>.tmp) names our pid too
            stem = stem.removesuffix(".tmp")
        pid = stem.rpartition(".")[2]
        if pid.isdigit() and not live(int(pid)):  # a zombie too: an unreaped worker killed mid-write
            _remove(tmp)
            removed.append(tmp)
    return removed


@contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """Yield a temporary path beside `path` for a writer that takes a path (savefig, a CSV or trace
    writer, pyperf's dump); on success it replaces `path`, on any failure it is removed. A full disk
    raises DiskFullError naming `path`."""
    path = Path(path)
    tmp = _tmp_name(path)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as exc:
        _remove(tmp)
        named = _as_users_path(as_folder_gone(as_disk_full(exc, path), path), tmp, path)
        if named is not exc:
            raise named from exc
        raise


def _as_users_path(exc: BaseException, tmp: Path, path: Path) -> BaseException:
    """An OSError about the temporary file (`/proc/.nope.xml.23246.tmp`: the folder refuses new files) as the same
    error about the path the user asked for, which is the one they know."""
    if type(exc).__module__ == "builtins" and isinstance(exc, OSError) and exc.filename == str(tmp):
        return OSError(exc.errno, exc.strerror, str(path))
    return exc


def _remove(tmp: Path) -> None:
    with suppress(OSError):
        tmp.unlink(missing_ok=True)


def atomic_write_bytes(path: Path | str, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path: Path | str, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


@contextmanager
def checked_append(path: Path | str) -> Iterator[None]:
    """Around an append to a stream that grows during a pass (markers.jsonl, a sampler's records): when
    the append fails, the file is cut back to its length before it, so no half line is left, and a full
    disk raises DiskFullError naming the file."""
    path = Path(path)
    try:
        before = path.stat().st_size
    except OSError:
        before = None
    try:
        yield
    except BaseException as exc:
        if before is not None and isinstance(exc, OSError):
            with suppress(OSError):
                os.truncate(path, before)
        full = as_disk_full(exc, path)
        if full is not exc:
            raise full from exc
        raise


RESERVE_NAME = ".hwprof-space-reserve.tmp"
RESERVE_BYTES = 128 * 1024
"""Room for the last run.json of a run whose disk filled up (the largest seen: 41 KB, yolov8n, default plan),
written twice (status, then the render error), each beside the one it replaces."""


def _allocate(fd: int, size: int) -> None:
    """Blocks really taken: posix_fallocate, or zeros where the filesystem does not support it."""
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as exc:
        if is_disk_full(exc):
            raise
        os.write(fd, b"\0" * size)


class SpaceReserve:
    """Space set aside in the run directory while a collection runs and given back when it ends or the disk
    fills: so that a run that ran out of space can still record that in run.json (status failed, where).
    A run stopped with SIGKILL leaves the file behind; its name says what it is. Under a file-size limit
    (ulimit -f) the reserve is one file no larger than the limit: the limit, not the reserve, is then what a
    write of the run meets, and that write's error names it."""

    def __init__(self, folder: Path, size: int = RESERVE_BYTES) -> None:
        self.path = folder / RESERVE_NAME
        limit = file_size_limit()
        size = size if limit is None else min(size, limit)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                _allocate(fd, size)
            finally:
                os.close(fd)
        except OSError as exc:
            _remove(self.path)
            full = as_disk_full(exc, self.path)
            if full is not exc:
                raise full from exc
            raise

    def release(self) -> None:
        _remove(self.path)
