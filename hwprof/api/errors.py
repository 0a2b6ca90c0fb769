"""The library's one error for a run directory it cannot give: missing, damaged, or still being collected."""

from __future__ import annotations


class RunError(Exception):
    """A run directory hwprof cannot read as a finished run: not there, a damaged file in it (the message names
    the file and the field, as `hwprof report` does), or a collect still writing it. The message is the command
    line's own line, without its `hwprof: error:` prefix."""
