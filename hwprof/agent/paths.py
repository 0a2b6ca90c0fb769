"""Where a service's agent listens: a Unix socket in its user's runtime folder, named by the service's PID.

Both sides find it from the PID and the uid alone (the service's environment is not the attaching shell's):
`/run/user/UID/hwprof/` where systemd made the user's runtime folder, else `/tmp/hwprof-UID/`. The folder is made
mode 0700 and must be the user's own, not a link: a folder another user made first is refused, never used."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

SOCKET_NAME = "agent-{pid}.sock"


def agent_dir(uid: int) -> Path:
    """The folder of the agents of `uid`'s processes (not made here)."""
    runtime = Path(f"/run/user/{uid}")
    if runtime.is_dir():
        return runtime / "hwprof"
    return Path(f"/tmp/hwprof-{uid}")


def socket_path(pid: int, uid: int) -> Path:
    return agent_dir(uid) / SOCKET_NAME.format(pid=pid)


class AgentDirError(OSError):
    """The agents' folder cannot be used safely; the message is one line."""


def own_agent_dir() -> Path:
    """This process's user's agents' folder, made (0700) where it is missing; AgentDirError where it is not a
    folder of this user's alone."""
    folder = agent_dir(os.getuid())
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700, parents=False)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise AgentDirError(f"{folder} is not a folder of this user's own: remove it, or the agent cannot listen")
    if info.st_mode & 0o077:
        os.chmod(folder, 0o700)
    return folder
