"""Prints the shell `export` lines that give uv pip's own configuration; scripts/suite.sh evaluates them.

tox builds the test environment with uv (the tox-uv plugin: about 15 s against pip's 100-120 s on this
project's 2-vCPU machine kind), but uv reads neither pip.conf nor PIP_* variables. A host whose wheels
come from a local folder or a mirror configures pip for that, and uv must see the same sources: find-links,
index-url and extra-index-url from `pip config list` (PIP_* variables first, as pip ranks them). Constraints
are tox.ini's (UV_CONSTRAINT beside PIP_CONSTRAINT, which replaces any of pip's configuration). A UV_*
variable already set is kept.

Usage: eval "$(python3 scripts/uv_env.py)"
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

UV_NAMES = {
    "find-links": ("UV_FIND_LINKS", ","),
    "index-url": ("UV_INDEX_URL", " "),
    "extra-index-url": ("UV_EXTRA_INDEX_URL", " "),
}
"""pip's option: uv's variable and its separator."""


def pip_settings(listed: str) -> dict[str, str]:
    """pip's settings as `pip config list` prints them (`section.name='value'`), PIP_* variables (`:env:.name`)
    ranked above the configuration files."""
    from_files: dict[str, str] = {}
    from_env: dict[str, str] = {}
    for line in listed.splitlines():
        key, sep, quoted = line.partition("=")
        if not sep:
            continue
        section, _, name = key.rpartition(".")
        if section not in (":env:", "global", "install"):
            continue
        (from_env if section == ":env:" else from_files)[name] = " ".join(shlex.split(quoted))
    return {**from_files, **from_env}


def exports(settings: dict[str, str], environ: dict[str, str]) -> list[str]:
    lines = []
    for name, (variable, separator) in UV_NAMES.items():
        if name not in settings or variable in environ:
            continue
        value = separator.join(settings[name].split())
        lines.append(f"export {variable}={shlex.quote(value)}")
    return lines


def main() -> int:
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False
    ).stdout
    print("\n".join(exports(pip_settings(listed), dict(os.environ))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
