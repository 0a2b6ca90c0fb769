"""`hwprof collect --config FILE` and `hwprof sweep --config FILE`: a command's options in a TOML or YAML file.

The file is a third client of the command's parser, after the command line and the library: each key is an option's
long name (`imgsz`, `counter-reads` or `counter_reads`), its value what the option takes, converted and checked by
the option's own parser type and choices (a list where the option takes a comma list). The file's values become the
parser's defaults, so an option given on the command line overrides it. The keys no option has: `program` (collect:
the program's words, as after `--`) and `collect-args` (sweep: every point's collect options, as after `--`). Paths
that name the run's inputs (images, weights, a program's stdin) are relative to the file; the others, as on the
command line, to the working folder.

A bad file is one line naming the file, the line where the parser gives it, the key and what is wrong (ConfigError,
a ValueError: exit 2). `collect --dump-config` prints the TOML file that reproduces the run (dump_toml).

Read within bounds (a hostile file costs one line, never memory or a hang): a regular file only (a FIFO would block
for ever), at most MAX_BYTES (run.json keeps the text whole), nested at most MAX_DEPTH, and YAML's aliases refused
before anything is built (`&a [...]` referred to nine times per level expands a 1 KB file past gigabytes). A UTF-8
byte order mark at the head is taken off, as editors on Windows write one. An error quotes at most SHOWN characters
of a value, made from the value's first items (never the whole value serialised, then cut).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import stat
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hwprof.core.uservalue import mode_kind

SUFFIXES = {".toml": "toml", ".yaml": "yaml", ".yml": "yaml"}
RELATIVE_TO_FILE = ("images", "weights", "program_stdin")
"""Options (dests) whose relative paths are taken from the file's folder: the run's inputs."""
WORDS = {"collect": "program", "sweep": "collect_args"}
"""The command's key for the words after `--`."""
NOT_IN_FILE = ("help", "config", "dump_config", "version")
MAX_BYTES = 1 << 20
"""A config file's largest size: options and a program's words take a few hundred bytes."""
MAX_DEPTH = 8
"""The deepest nesting a config file may hold: its values are names, numbers and lists of them (depth 2)."""
SHOWN = 80
"""The most characters of a value an error quotes."""


class ConfigError(ValueError):
    """A config file that cannot be used: its one line names the file, the line and the key."""


@dataclass(frozen=True)
class ConfigFile:
    """A config file as read: where, its format, its text (run.json keeps it), and its options by key."""

    path: Path
    format: str
    text: str
    options: dict[str, Any]

    def where(self, key: str | None = None) -> str:
        """`FILE:LINE` of the key's line, where it is found; `FILE` otherwise."""
        if key is None:
            return str(self.path)
        sign = "=" if self.format == "toml" else ":"
        pattern = rf"^\s*[\"']?{re.escape(key)}[\"']?\s*{sign}"
        for number, line in enumerate(self.text.splitlines(), start=1):
            if re.match(pattern, line):
                return f"{self.path}:{number}"
        return str(self.path)

    def error(self, key: str, message: str) -> ConfigError:
        return ConfigError(f"{self.where(key)}: {key}: {message}")

    def to_json(self) -> dict[str, str]:
        return {"path": str(self.path), "format": self.format, "text": self.text}


def read_config(path: Path) -> ConfigFile:
    """The file parsed (TOML or YAML by its suffix); ConfigError for a missing, unreadable, malformed or unbounded
    one."""
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise ConfigError(f"{path}: a config file is .toml, .yaml or .yml (got {path.suffix or 'no suffix'!r})")
    text = _read_text(path).removeprefix("\ufeff")
    try:
        options = tomllib.loads(text) if kind == "toml" else yaml.load(text, Loader=_NoAliasLoader)  # a SafeLoader
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}{line}: not valid YAML: {problem}") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested deeper than a config file may be (at most {MAX_DEPTH} levels)") from None
    if _depth(options) > MAX_DEPTH:
        raise ConfigError(f"{path}: nested deeper than a config file may be (at most {MAX_DEPTH} levels)")
    options = {} if options is None else options
    if not isinstance(options, dict):
        raise ConfigError(f"{path}: the file must hold option names and their values (got a {type(options).__name__})")
    return ConfigFile(path.resolve(), kind, text, options)


def _read_text(path: Path) -> str:
    """The file's text: a regular file of at most MAX_BYTES, opened without blocking (a FIFO is refused, not
    waited on)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except PermissionError:
        raise ConfigError(f"{path}: not readable (permission denied): chmod u+r {path}") from None
    except OSError as exc:  # a symlink loop, a name too long: the system's reason
        raise ConfigError(f"{path}: cannot be opened ({exc.strerror or exc})") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise ConfigError(f"{path}: a folder, not a config file")
        if not stat.S_ISREG(mode):
            raise ConfigError(f"{path}: not a regular file ({mode_kind(mode)}): give a config file")
        data = os.read(fd, MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise ConfigError(f"{path}: larger than a config file may be ({MAX_BYTES >> 10} KiB at most)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


class _NoAliasLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses an alias (`*name`) where it meets one, before it is expanded."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not taken in a config file", mark)
        return super().compose_node(parent, index)


def _depth(value: Any, level: int = 0) -> int:
    """How deeply `value` nests lists and tables, counted no further than one level past MAX_DEPTH."""
    if level > MAX_DEPTH or not isinstance(value, dict | list):
        return level
    items = value.values() if isinstance(value, dict) else value
    return max((_depth(v, level + 1) for v in items), default=level + 1)


def file_defaults(config: ConfigFile, parser: argparse.ArgumentParser, command: str) -> dict[str, Any]:
    """The file's options as `parser`'s dests and converted values (what set_defaults takes)."""
    actions = {s.lstrip("-"): a for a in parser._actions for s in a.option_strings if s.startswith("--")}
    words = WORDS.get(command)
    out: dict[str, Any] = {}
    for key, value in config.options.items():
        name = str(key).replace("_", "-")
        if words is not None and name == words.replace("_", "-"):
            out[words] = _words(config, str(key), value)
            continue
        action = actions.get(name)
        if action is None or action.dest in NOT_IN_FILE:
            raise config.error(str(key), f"not an option of `hwprof {command}` (see `hwprof {command} --help`)")
        converted = _convert(config, str(key), value, action)
        if action.dest in RELATIVE_TO_FILE and isinstance(converted, str | Path) and converted:
            converted = type(converted)(config.path.parent / Path(converted).expanduser())
        out[action.dest] = converted
    return out


def _words(config: ConfigFile, key: str, value: Any) -> list[str]:
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list) and all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in value):
        return [str(v) for v in value]
    raise config.error(key, f"a list of words, as after `--` (got {_shown(value)})")


def _convert(config: ConfigFile, key: str, value: Any, action: argparse.Action) -> Any:
    """`value` as the option's parser would have made it from the command line's words."""
    if isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction):
        if not isinstance(value, bool):
            raise config.error(key, f"true or false (got {_shown(value)})")
        return value if isinstance(action, argparse._StoreTrueAction) else not value
    if isinstance(value, dict) or value is None:
        raise config.error(key, f"a value, not {_shown(value)}")
    convert: Callable[[str], Any] = action.type if callable(action.type) else str
    if isinstance(value, list):
        if any(isinstance(v, list | dict | bool) or v is None for v in value):
            raise config.error(key, f"a list of names or numbers (got {_shown(value)})")
        if action.nargs in ("*", "+"):
            return [_one(config, key, str(v), convert, action) for v in value]
        if action.type is None or action.type in (int, float, Path, str):
            raise config.error(key, f"one value, not a list (got {_shown(value)})")
        value = ",".join(str(v) for v in value)  # a comma list, as the command line takes it
    elif isinstance(value, bool):
        raise config.error(key, f"takes a value, not {str(value).lower()} (it is no on/off switch)")
    converted = _one(config, key, str(value), convert, action)
    return [converted] if action.nargs in ("*", "+") else converted


def _one(config: ConfigFile, key: str, text: str, convert: Callable[[str], Any], action: argparse.Action) -> Any:
    try:
        value = convert(text)
    except (ValueError, TypeError, argparse.ArgumentTypeError) as exc:
        kind = {int: "an integer", float: "a number"}.get(convert)  # type: ignore[call-overload]
        raise config.error(key, f"{kind} (got {text!r})" if kind else f"{exc} (got {text!r})") from None
    if action.choices is not None and value not in action.choices:
        raise config.error(key, f"one of {', '.join(map(str, action.choices))} (got {text!r})")
    return value


def _shown(value: Any) -> str:
    """A short quote of `value` as JSON: its first items only, at most SHOWN characters."""
    return json.dumps(_first_items(value, 3), default=str)[:SHOWN]


def _first_items(value: Any, levels: int) -> Any:
    """`value` cut to its first 4 items per list or table, `levels` deep ("..." for what is left out)."""
    if isinstance(value, str):
        return value[:SHOWN]
    if not isinstance(value, dict | list):
        return value
    if levels == 0:
        return "..."
    if isinstance(value, dict):
        items = list(value.items())[:4]
        return {str(k)[:SHOWN]: _first_items(v, levels - 1) for k, v in items} | (
            {"...": "..."} if len(value) > 4 else {}
        )
    return [_first_items(v, levels - 1) for v in value[:4]] + (["..."] if len(value) > 4 else [])


def dump_toml(args: argparse.Namespace, parser: argparse.ArgumentParser, command: str) -> str:
    """The TOML file that gives these parsed options again through `--config` (every option with a value)."""
    lines = [f"# hwprof {command} --config FILE: the options of this run (an option on the command line overrides)"]
    seen: set[str] = set()
    for action in parser._actions:
        long = next((s for s in action.option_strings if s.startswith("--")), None)
        if long is None or action.dest in NOT_IN_FILE or action.dest in seen:
            continue
        seen.add(action.dest)
        value: Any = getattr(args, action.dest, None)
        if value is None or (value == [] and action.nargs not in ("*", "+")):
            continue
        if isinstance(action, argparse._StoreFalseAction):
            value = not value
        if action.dest in RELATIVE_TO_FILE:  # taken from the file's folder when read back: written whole
            value = str(Path(value).expanduser().resolve())
        lines.append(f"{long[2:]} = {_toml_value(value)}")
    words = WORDS.get(command, "")
    extra = getattr(args, words, None) if words else None
    if extra:
        lines.append(f"{words.replace('_', '-')} = {_toml_value(list(extra))}")
    return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value))  # a TOML basic string: JSON's escapes are TOML's
