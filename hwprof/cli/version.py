"""`hwprof --version`: hwprof's, torch's and Python's versions and the platform, for a bug report. Read from the
installed packages' metadata: importing torch for its version would take seconds."""

from __future__ import annotations

import argparse
import platform
import sys
from collections.abc import Sequence
from importlib import metadata
from typing import Any


def package_version(name: str) -> str:
    """The installed distribution's version, or "not installed"."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def version_text() -> str:
    """Three lines: hwprof, torch, Python with its implementation and the platform."""
    python = f"{platform.python_version()} ({platform.python_implementation()}) on {platform.platform()}"
    return f"hwprof {package_version('hwprof')}\ntorch {package_version('torch')}\nPython {python}\n"


class VersionAction(argparse.Action):
    """`--version`: print version_text to stdout and exit 0 (argparse's own action takes a fixed string, which
    every build of the parser, the library's too, would read the metadata for)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        kwargs.setdefault("help", "print hwprof's, torch's and Python's versions and exit")
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_args: object, **_kwargs: object) -> None:
        sys.stdout.write(version_text())
        parser.exit()
