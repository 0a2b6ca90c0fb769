"""MkDocs hook (mkdocs.yml `hooks:`): the reference pages generated from the code at build time, as files that
exist only in the built site, so they cannot drift from the code they describe.

- reference/cli.md: every command and option, from the parser `hwprof` runs (cli_reference.py);
- reference/run-directory.md: the run directory's files and records, from hwprof.schema (schema_reference.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the generators beside this hook

from cli_reference import cli_markdown
from schema_reference import run_directory_markdown

GENERATED = {"reference/cli.md": cli_markdown, "reference/run-directory.md": run_directory_markdown}
"""The page's path in the site -> the function that writes it."""


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for path, make in GENERATED.items():
        files.append(File.generated(config, path, content=make()))
    return files
