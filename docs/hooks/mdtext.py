"""Markdown helpers shared by the generated reference pages: table cells that survive any text."""

from __future__ import annotations

import re

_CODE = re.compile(r"(`[^`]*`)")
_ESCAPES = (("\\", "\\\\"), ("|", "\\|"), ("<", "&lt;"), ("*", "\\*"), ("_", "\\_"))
"""Outside code spans: what Markdown would read as a cell's end, HTML or emphasis (the backslash first)."""


def cell(text: str | None) -> str:
    """`text` as one Markdown table cell: on one line, its pipes escaped, and outside its code spans the
    characters Markdown would read as HTML or emphasis escaped (a help text's `<run-id>`, `*.png`)."""
    if not text:
        return ""
    parts = _CODE.split(" ".join(str(text).split()))
    out = []
    for i, part in enumerate(parts):
        if i % 2:  # a code span: only its pipes, which would split the cell
            out.append(part.replace("|", "\\|"))
        else:
            for plain, escaped in _ESCAPES:
                part = part.replace(plain, escaped)
            out.append(part)
    return "".join(out)


def prose(text: str) -> str:
    """A help text's paragraphs as Markdown paragraphs, escaped as cells are (`results/<model>-<time>/` would
    otherwise be read as HTML tags and vanish)."""
    return "\n\n".join(cell(para) for para in text.strip().split("\n\n") if para.strip()) + "\n"


def code(text: str) -> str:
    """`text` as a code span in a table cell: only its pipes escaped (Markdown leaves the rest as is)."""
    return "`" + " ".join(str(text).split()).replace("|", "\\|") + "`"


def table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """A Markdown table; every cell given is already a cell (see `cell`)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def slug(text: str) -> str:
    """An anchor for a heading the page links to itself."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
