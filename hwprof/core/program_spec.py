"""The user's own program as `hwprof collect [options] -- python SCRIPT ARGS` names it (hwprof.program runs it).

Every pass runs the program anew, in the pass's worker process, with the interpreter hwprof itself runs in: the
collectors open in that process (counters, perf record, py-spy, Scalene, callgrind all follow it), and a
program run by another interpreter would not see them. The word before the script (`python`, `python3`, or a
path to this same interpreter) says how the user runs it; another interpreter is refused with the fix.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hwprof.core.uservalue import path_problem, shown

PROGRAM_FAMILY = "program"
"""model.json's family for a program's model: its weights are the program's own, not hwprof's seeded init."""
PROGRAM_ENDS = ("stop", "run")
"""After the measured calls: "stop" ends the program there (cleanly: its `finally` blocks and context managers
run), "run" lets it run to its own end unmeasured."""
PROGRAM_SPAN = "program"
"""The one stage of a program that calls no model: its whole run, profiled by the whole-process collectors."""
WHOLE_PROCESS_ENV = "HWPROF_PROGRAM_WHOLE_PROCESS"
"""Set in a pass's worker by the session once a pass found no model, to that pass's one line saying why: the
worker profiles the program's whole run (hwprof.session.program_pass_runner), and removes the variable before the
program starts."""
PYTHON_WORDS = ("python", "python3", f"python3.{sys.version_info.minor}")
RESERVED_STAGES = ("forward", "iteration", "other")
"""Stage names hwprof gives itself: the model's call, the whole iteration, and the time no stage claims."""
MIN_WARMUP = 1
"""The calls after the one that found the model: the first of them opens the first whole iteration, so it is
never measured."""
STDIN_EOF_NOTE = (
    "the program read end of file on stdin: hwprof gives it /dev/null, since every pass runs it anew and a stream "
    "could feed only the first; give its input with --program-stdin FILE (each pass reads the file from its start)"
)


class ProgramError(ValueError):
    """The program's command line cannot run; the message is one line with the fix."""


@dataclass(frozen=True)
class StageTarget:
    """A function whose every call is a stage: `--stage NAME=module:function` (or `module:Class.method`), or one
    hwprof knows by name (hwprof.program.known_stages)."""

    stage: str
    module: str
    attr: str
    """The function in its module: "non_max_suppression", or "LetterBox.__call__" for a method."""

    @property
    def label(self) -> str:
        return f"{self.stage}={self.module}:{self.attr}"


def parse_stage(text: str) -> StageTarget:
    """`--stage NAME=module:function` as a target; ProgramError (one line) when it is not that shape. Whether the
    module and the function exist is known only once the program imports the module."""
    name, eq, where = text.partition("=")
    module, colon, attr = where.partition(":")
    name = name.strip()
    if not eq or not colon or not name or not _dotted(module) or not _dotted(attr):
        raise ProgramError(
            f"--stage {shown(text)} is not NAME=module:function (e.g. --stage decode=mypipeline.io:read_frame, "
            "or NAME=module:Class.method)"
        )
    if name in RESERVED_STAGES or any(c.isspace() for c in name):
        why = "is hwprof's own" if name in RESERVED_STAGES else "holds a space"
        raise ProgramError(f"--stage {shown(text)}: the stage name {shown(name)} {why}; pick another")
    return StageTarget(name, module, attr)


@dataclass
class ProgramSpec:
    """What to run and how: config.json's `program` (None for the built-in pipeline)."""

    argv: list[str]
    """The program's sys.argv: [script, args...], or ["-m", module, args...]."""
    cwd: str
    """The directory hwprof was run from: the program runs there (its relative paths are the user's)."""
    model_path: str | None = None
    """--program-model: the module to take as the model, as the program names it ("detector.model")."""
    end: str = "stop"
    """--program-end: "stop" (default) or "run"; see PROGRAM_ENDS."""
    stages: list[str] = field(default_factory=list)
    """--stage NAME=module:function, for the user's own functions."""
    stdin: str | None = None
    """--program-stdin: the file given to the program as its stdin (absolute), opened anew by every pass's run of
    it; None: /dev/null (hwprof.program.launch)."""
    attached: int | None = None
    """`hwprof attach PID`: the running service's process ID. Its passes run inside that process, over windows of its
    own calls (hwprof.agent); argv and cwd are the service's, read from its agent (with --no-agent, from /proc)."""
    outside: bool = False
    """`hwprof attach --no-agent`: the service is sampled from outside (perf, py-spy), whole-process
    (hwprof.agent.outside)."""

    def stage_targets(self) -> list[StageTarget]:
        """The --stage options as targets (ProgramError for one that is not NAME=module:function)."""
        return [parse_stage(text) for text in self.stages]

    @property
    def module(self) -> str | None:
        """The module of `-m MODULE`, None for a script."""
        return self.argv[1] if self.argv[0] == "-m" else None

    @property
    def code_dir(self) -> str:
        """The folder of the program's own code: its script's, or (`-m MODULE`) the folder it runs in."""
        return str(Path(self.argv[0]).parent) if self.module is None else self.cwd

    @property
    def name(self) -> str:
        """A short name for the run (its directory and its report): the script's stem or the module."""
        return self.module or Path(self.argv[0]).stem

    def to_dict(self) -> dict[str, Any]:
        return {
            "argv": self.argv,
            "cwd": self.cwd,
            "model_path": self.model_path,
            "end": self.end,
            "stages": self.stages,
            **({"stdin": self.stdin} if self.stdin is not None else {}),
            **({"attached": self.attached} if self.attached is not None else {}),
            **({"outside": True} if self.outside else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProgramSpec:
        return cls(
            argv=[str(a) for a in data["argv"]],
            cwd=str(data["cwd"]),
            model_path=data.get("model_path"),
            end=str(data.get("end", "stop")),
            stages=[str(s) for s in data.get("stages") or []],
            stdin=str(data["stdin"]) if data.get("stdin") is not None else None,
            attached=int(data["attached"]) if data.get("attached") is not None else None,
            outside=bool(data.get("outside", False)),
        )


def program_spec(command: list[str], cwd: str | None = None, **options: Any) -> ProgramSpec:
    """The spec of `-- COMMAND...`; ProgramError (one line, with the fix) when it cannot run."""
    cwd = cwd or os.getcwd()
    if not command:
        raise ProgramError("no program after `--`: give one, e.g. `hwprof collect -- python detect.py --source img/`")
    words = list(command)
    if _is_interpreter(words[0]):
        _check_interpreter(words[0])
        words = words[1:]
    if not words:
        raise ProgramError(f"`-- {shown(command[0])}` names no script: add one, e.g. `-- python detect.py`")
    if words[0] == "-m":
        if len(words) < 2 or not words[1]:
            raise ProgramError("`-m` names no module: e.g. `-- python -m mypackage.detect`")
        argv = words
    elif words[0].startswith("-"):
        raise ProgramError(
            f"the interpreter option {shown(words[0])} is not supported: run a script (`-- python SCRIPT ...`) "
            "or a module (`-- python -m MODULE ...`)"
        )
    else:
        script = Path(cwd, words[0])
        problem = path_problem(script)
        if problem is not None:
            raise ProgramError(f"the program {shown(words[0])} {problem}")
        if not _is_python_source(script):
            raise ProgramError(
                f"the program {shown(words[0])} is not a Python script (no .py name, no python #! line): "
                "hwprof runs Python programs, `-- python SCRIPT ...`; profile other programs with `perf record -- CMD`"
            )
        argv = [str(script.resolve()), *words[1:]]
    spec = ProgramSpec(argv=argv, cwd=cwd, **options)
    if spec.stdin is not None:
        spec.stdin = stdin_file(spec.stdin, cwd)
    if spec.end not in PROGRAM_ENDS:
        raise ProgramError(f"--program-end is 'stop' or 'run' (got {shown(spec.end)})")
    spec.stage_targets()
    return spec


def stdin_file(path: str, cwd: str) -> str:
    """--program-stdin's file, absolute; ProgramError (one line) where it is not a readable file. A pipe or a
    device is refused too: every pass runs the program anew, and a stream would feed only the first."""
    file = Path(cwd, path)
    problem = path_problem(file)
    if problem is not None:
        raise ProgramError(f"--program-stdin {shown(path)} {problem}: give a file, read anew by every pass")
    try:
        with file.open("rb"):
            pass
    except OSError as exc:
        raise ProgramError(f"--program-stdin {shown(path)} cannot be read ({exc.strerror or exc})") from None
    return str(file.resolve())


def _dotted(text: str) -> bool:
    return all(part.isidentifier() for part in text.split("."))


def _is_python_source(script: Path) -> bool:
    """A .py file, or a file whose #! line names python (an installed console script, say)."""
    if script.suffix in (".py", ".pyw"):
        return True
    try:
        with script.open("rb") as handle:
            first = handle.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def _is_interpreter(word: str) -> bool:
    name = Path(word).name
    return name in PYTHON_WORDS or (name.startswith("python") and not name.endswith(".py"))


def _check_interpreter(word: str) -> None:
    """`python`/`python3` name hwprof's own interpreter; a path must be that interpreter (the same file)."""
    if Path(word).name in PYTHON_WORDS and os.sep not in word:
        return
    try:
        same = Path(word).resolve().samefile(Path(sys.executable).resolve())
    except OSError:
        same = False
    if not same:
        raise ProgramError(
            f"hwprof runs the program in its own interpreter ({sys.executable}), not {shown(word)}: "
            "write `-- python SCRIPT`, or install hwprof into that interpreter's environment and run its hwprof"
        )
