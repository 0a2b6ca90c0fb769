"""A value the user gave (an option, an environment variable, a path) as a one-line message quotes it.

A message quotes the user's value so that they can see which one is wrong, but the value is theirs: it may
hold a newline (which would split the one line into two), a NUL, or 5,000 characters (which would bury the
line's what and fix). `shown` escapes every control character and cuts a value longer than WHOLE_CHARS to
its first SHOWN_CHARS characters, saying how long it was; `os_error_line` does the same for an OSError whose file name
is the user's.

Also the kind of a path as the user would name it (`path_kind`: "a directory", "a character device"), for
a message that says what a path is instead of "does not exist"; and the name the user may have meant (`close_to`:
a command, an option, a choice, a model).
"""

from __future__ import annotations

import difflib
import errno
import os
import stat
from collections.abc import Sequence

WHOLE_CHARS = 240
"""The longest value a message quotes whole (a deep but real path)."""
SHOWN_CHARS = 60
"""The characters a message quotes of a longer value, followed by its length."""


def escaped(text: str) -> str:
    """`text` with every control character escaped as Python writes it ("\\n", "\\x00"): one line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def shown(value: str | os.PathLike[str]) -> str:
    """`value` on one line (control characters escaped); one longer than WHOLE_CHARS cut to its first
    SHOWN_CHARS characters with its length: "/x/aaaa… (5,000 characters)"."""
    text = os.fspath(value)
    if len(text) <= WHOLE_CHARS:
        return escaped(text)
    return f"{escaped(text[:SHOWN_CHARS])}… ({len(text):,} characters)"


def os_error_line(exc: OSError) -> str:
    """str(exc) with its file names shown (escaped and cut): "[Errno 36] File name too long: '/xaaa…'" is
    5,049 characters for a 5,000-character path."""
    if exc.filename is None:
        return escaped(str(exc))
    names = [n for n in (exc.filename, exc.filename2) if n is not None]
    prefix = f"[Errno {exc.errno}] " if exc.errno is not None else ""
    return f"{prefix}{exc.strerror}: " + " -> ".join(shown(os.fsdecode(n)) for n in names)


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISREG, "a file"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
)


def path_kind(path: str | os.PathLike[str]) -> str:
    """What `path` is, in words: "a directory", "a file", "a character device", ... or why it cannot
    be one: "not found", "too long for a path", "a name with a NUL character"."""
    text = os.fspath(path)
    if "\0" in text:
        return "a name with a NUL character"
    try:
        mode = os.stat(text).st_mode
    except FileNotFoundError:
        return "not found"
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            return "too long for a path"
        return f"not readable ({exc.strerror})"
    return mode_kind(mode)


def mode_kind(mode: int) -> str:
    """What a file of this st_mode is, in words ("a named pipe"), for a caller that has stat'ed it already."""
    return next((words for test, words in _KINDS if test(mode)), "not a file or a directory")


def path_problem(path: str | os.PathLike[str], wanted: str = "a file") -> str | None:
    """Why `path` is not `wanted` ("a file", "a directory"), as a message goes on after the path: "does not
    exist", "is a directory", "is a character device", "is too long for a path"; None when it is."""
    kind = path_kind(path)
    if kind == wanted:
        return None
    return "does not exist" if kind == "not found" else f"is {kind}"


def exception_line(exc: BaseException) -> str:
    """The one line of a failure, as the command line prints it after `hwprof: error:` and the library raises it:
    a user's value in it escaped (a newline would split the line), and an OSError's file name cut (a
    5,000-character path is not a message)."""
    from hwprof.core.atomic import DiskFullError

    if isinstance(exc, OSError) and not isinstance(exc, DiskFullError) and type(exc).__str__ is OSError.__str__:
        return os_error_line(exc)
    return escaped(str(exc))


def close_to(word: str, names: Sequence[str]) -> str:
    """' (did you mean X?)' for the closest of `names` (difflib), or ''."""
    found = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    return f" (did you mean {found[0]}?)" if found else ""
