"""The run directory's reference, read from the schema's own types when the site is built: the files a run
directory holds (hwprof.rundir.names: its docstring's map and each name's constant with its docstring) and, for
each JSON file hwprof reads back, every record it is read into (hwprof.schema: codec.Record dataclasses), field
by field: the JSON key, the Python type, the values a reader accepts (codec.specs: the same words as the error a
damaged file gives) and the field's docstring or comment. A field added to a record is on the next build."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import tokenize
import typing
from functools import cache
from typing import Any

from mdtext import cell, code, slug, table

INTERNAL = {"json_extra", "json_order"}
"""codec.Record's bookkeeping: not keys of the file."""


@dataclasses.dataclass(frozen=True)
class FileDoc:
    """One file of a run directory and the record it is read into."""

    path: str
    root: type
    about: str


def files() -> list[FileDoc]:
    """The run directory's JSON files that hwprof reads back through records, with their root types."""
    from hwprof.schema import advice_file, hotspots_file, kernels_file, pass_files, records, run

    return [
        FileDoc("run.json", run.RunDoc, run.__doc__ or ""),
        FileDoc("passes/<pass>/result.json", pass_files.PassResult, pass_files.__doc__ or ""),
        FileDoc("passes/<pass>/model.json", pass_files.ModelInfo, ""),
        FileDoc("passes/<pass>/runtime.json", pass_files.RuntimeFile, ""),
        FileDoc("advice.json", advice_file.AdviceFile, advice_file.__doc__ or ""),
        FileDoc("passes/kernels/perf_sampling.kernels.json", kernels_file.KernelsFile, kernels_file.__doc__ or ""),
        FileDoc(f"passes/trace/{hotspots_file.HOTSPOTS_FILE}", hotspots_file.HotspotsFile, hotspots_file.__doc__ or ""),
        FileDoc("passes/<pass>/<collector>.records.jsonl", records.Span, records.__doc__ or ""),
    ]


@cache
def _field_notes(cls: type) -> dict[str, str]:
    """Field name -> the docstring under it, or else the comment on its line, from `cls`'s own source."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    source = inspect.cleandoc("\n" + source) if source.startswith((" ", "\t")) else source
    comments = {
        tok.start[0]: tok.string.lstrip("# ").strip()
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    }
    body = ast.parse(source).body[0]
    notes: dict[str, str] = {}
    assert isinstance(body, ast.ClassDef)
    for i, node in enumerate(body.body):
        if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name):
            continue
        after = body.body[i + 1] if i + 1 < len(body.body) else None
        if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
            notes[node.target.id] = inspect.cleandoc(after.value.value)
        elif node.lineno in comments:
            notes[node.target.id] = comments[node.lineno]
    return notes


def _note(cls: type, name: str) -> str:
    """The field's note from the first class along the MRO that declares it with one."""
    for klass in cls.__mro__:
        if name in _field_notes(klass):
            return _field_notes(klass)[name]
    return ""


def _annotation(cls: type, name: str) -> str:
    """The field's annotation as its source writes it (`NonNegative | None`)."""
    for klass in cls.__mro__:
        ann = inspect.get_annotations(klass).get(name)
        if ann is not None:
            return ann if isinstance(ann, str) else getattr(ann, "__name__", str(ann))
    return ""


def _is_record(kind: Any) -> bool:
    from hwprof.schema.codec import Record

    return isinstance(kind, type) and issubclass(kind, Record)


def _link(kind: type) -> str:
    return f"[{kind.__name__}](#{slug(kind.__name__)})"


def _rows(cls: type) -> tuple[list[tuple[str, ...]], list[type]]:
    """The table rows of record `cls` and the record types its fields hold."""
    inner: list[type] = []
    rows = []
    if _is_record(cls):
        from hwprof.schema.codec import specs

        required = set(getattr(cls, "REQUIRED", ()))
        for key, spec in specs(cls).items():
            words = spec.expected
            if spec.record is not None:
                inner.append(spec.record)
                shape = "name -> " if spec.record_map else "list of " if spec.record_list else ""
                words = f"{spec.expected}: {shape}{_link(spec.record)}"
            else:
                words = cell(words)
            if spec.bound is not None:
                words += f", {cell(spec.bound.words)}"
            if not spec.nullable:
                words += ", never null"
            if key in required:
                words += ", **required**"
            ann = _annotation(cls, spec.attr)
            rows.append((f"`{key}`", code(ann) if ann else "", words, cell(_note(cls, spec.attr))))
        return rows, inner
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        rows.append((f"`{f.name}`", code(_annotation(cls, f.name)), code(str(hints[f.name])), cell(_note(cls, f.name))))
    return rows, inner


def _record_section(cls: type, level: int) -> tuple[str, list[type]]:
    rows, inner = _rows(cls)
    doc = inspect.getdoc(cls) or ""
    own_doc = doc if cls.__doc__ else ""  # a dataclass without one gets a generated signature as its doc
    head = f"{'#' * level} {cls.__name__}\n\n`{cls.__module__}.{cls.__qualname__}`"
    body = f"{head}\n\n{own_doc}\n\n" if own_doc else f"{head}\n\n"
    body += table(("key", "type", "value", "what it holds"), rows) if rows else "No fields of its own.\n"
    return body, inner


def _summary_types() -> list[type]:
    """The typed summaries and probe details run.json's collector entries are read into, by collector name."""
    from hwprof.schema.probes import PROBE_TYPES
    from hwprof.schema.run import SUMMARY_TYPES

    seen: list[type] = []
    for kind in [*SUMMARY_TYPES.values(), *PROBE_TYPES.values()]:
        if kind not in seen:
            seen.append(kind)
    return seen


def _file_section(doc: FileDoc, done: set[type]) -> str:
    """A file's heading, its module's description, and every record reachable from its root, each once."""
    from hwprof.schema import records

    parts = [f"## `{doc.path}`\n"]
    if doc.about:
        parts.append(inspect.cleandoc(doc.about) + "\n")
    queue = [doc.root]
    if doc.root is records.Span:
        queue = [records.Span, records.CounterSample, records.StackSample, records.ThreadName]
    if doc.path == "run.json":
        queue += _summary_types()
    while queue:
        kind = queue.pop(0)
        if kind in done:
            continue
        done.add(kind)
        section, inner = _record_section(kind, 3)
        parts.append(section)
        queue += [k for k in inner if k not in done]
    return "\n".join(parts)


def _names_table() -> str:
    """hwprof.rundir.names: each file name's constant, its value and its docstring."""
    import hwprof.rundir.names as names

    source = inspect.getsource(names)
    tree = ast.parse(source)
    notes: dict[str, str] = {}
    for i, node in enumerate(tree.body):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            after = tree.body[i + 1] if i + 1 < len(tree.body) else None
            if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                notes[node.targets[0].id] = inspect.cleandoc(str(after.value.value))
    rows = []
    for name, value in vars(names).items():
        if name.isupper() and isinstance(value, str | tuple):
            shown = ", ".join(value) if isinstance(value, tuple) else value
            rows.append((code(shown), code(name), cell(notes.get(name, ""))))
    return table(("file or folder", "constant", "note"), rows)


def run_directory_markdown() -> str:
    """The whole page."""
    import hwprof.rundir.names as names
    from hwprof.schema.check import SCHEMA_VERSION

    parts = [
        "# Run directory reference\n",
        "Generated from hwprof's own types when this site is built (`hwprof.rundir.names` and the records of "
        "`hwprof.schema`), so it says what the reader of this version accepts. A record's *value* column uses "
        "the words of the error a damaged file gives. How the files fit together, and the checks a reader makes, "
        "are in [The run directory](../run-directory.md).\n",
        f"run.json's `schema_version` is **{SCHEMA_VERSION}**; readers refuse other versions.\n",
        "## The files\n",
        "```text\n" + inspect.cleandoc(names.__doc__ or "").split("\n\n", 1)[-1] + "\n```\n",
        _names_table(),
    ]
    done: set[type] = set()
    parts += [_file_section(doc, done) for doc in files()]
    return "\n".join(parts)
