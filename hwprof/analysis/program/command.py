"""A user's program's command as the user gave it, for the report's first line about it: `python detect.py
--source inference/images`. run.json keeps the script's absolute path (hwprof resolves it, and runs the program
in the folder hwprof was run from); the user typed it relative to that folder, so it is shown relative where it
lies inside it."""

from __future__ import annotations

import shlex
from pathlib import PurePath

from hwprof.schema.program import ProgramDoc


def program_command(program: ProgramDoc) -> str:
    """ "python detect.py --source img/", "python -m pkg.detect --fast"; "python ?" where run.json has no argv."""
    argv = list(program.argv or []) or ["?"]
    if argv[0] != "-m" and program.cwd:
        script, cwd = PurePath(argv[0]), PurePath(program.cwd)
        if script.is_absolute() and script.is_relative_to(cwd):
            argv[0] = str(script.relative_to(cwd))
    command = shlex.join(["python", *argv])
    if program.attached is not None:
        return f"{command} (attached to PID {program.attached})"
    return command
