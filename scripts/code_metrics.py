"""The code figures issue 28 asks for, measured on a checkout: how data travels from the run directory to
the report, and how large the pieces are.

    python scripts/code_metrics.py [ROOT] [--json] [--where] [--dicts]

- `dict[str, Any]`: every occurrence in hwprof/ and collectors/; and those outside the JSON boundary: not
  in a serializer (a function named to_dict, from_dict, to_json, from_json, to_row, from_row, as_json or
  ending in _json, _dict or _rows), and not in the `JsonObject` alias's definition. `--dicts` lists the
  latter, one file:line each.
- run-data digs: `.get("...")` calls on a string key in the layers that read a run (analysis, render,
  finishing, advise), outside the schema package; and chains of two or more `.get(` on one line anywhere.
- file access outside the reader and writer: calls that open, read or write a file (open, read_text,
  read_bytes, write_text, write_bytes, json.load, json.dump, .open) in analysis/ and render/, and in the
  whole package outside the modules named READ_WRITE below.
- run-directory file calls outside rundir/: the calls above, outside the modules named READ_WRITE, less those
  that are not about a run directory (the rule, SYSTEM_SIDE): collectors/ (their own raw artifacts and the
  foreign tools' outputs they parse), hardware/ and perf/ (the hardware-access layers: /proc, /sys, perf
  events, caches outside any run directory), every line of a function that names a "/proc" or "/sys" path
  (a process's or the kernel's files, e.g. session/child.py's), and lines that call no file (NOT_A_FILE:
  a `def open(`, a collector's `.open(ctx)` hook, an in-memory tar archive). What is left reads or writes a
  run directory (or a sweep's or advise's folder) itself, or a model's or host's cache. `--where` lists them.
- modules per package, the largest module (lines) and the longest function (lines, decorators excluded); the
  modules over MODULE_LINES lines and the functions over FUNCTION_LINES.

`--size-report` prints only those two lists and the count of `dict[str, Any]` outside serializers: tox prints it
before the tests (issue 67), so that the pile is seen; it is never a failing gate (exit 0 whatever it finds).
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

READ_WRITE = ("rundir/", "core/atomic.py")
"""Modules allowed to touch files in the run directory (paths relative to hwprof/ or collectors/)."""
RUN_READERS = ("analysis/", "render/", "finish", "advise/")
SCHEMA = ("schema/", "runschema.py")
FILE_CALL = re.compile(
    r"(\bopen\(|\.read_text\(|\.read_bytes\(|\.write_text\(|\.write_bytes\(|json\.load\(|json\.dump\(|\.open\()"
)
SYSTEM_SIDE = ("collectors/", "hwprof/hardware/", "hwprof/perf/")
"""Packages (paths relative to ROOT) whose file calls are not about a run directory (see the docstring)."""
SYSTEM_PATH = re.compile(r"[\"'](/proc|/sys)\b")
"""A function naming one of these paths reads the process's or the kernel's files."""
NOT_A_FILE = re.compile(r"^\s*def open\(|\.open\(ctx\b|tarfile\.open\(fileobj=")
KEY_GET = re.compile(r"\.get\(\s*[\"']")
MODULE_LINES = 400
FUNCTION_LINES = 60
CHAIN = re.compile(r"\.get\([^()]*(\([^()]*\))?[^()]*\)[^\n]*\.get\(")


@dataclass
class Figures:
    dict_str_any: int
    dict_str_any_outside_serializers: int
    run_data_key_gets: int
    get_chains: int
    file_calls_analysis_render: int
    file_calls_outside_reader_writer: int
    run_dir_file_calls_outside_rundir: int
    """The run-directory file calls outside rundir/ (the docstring's rule); run_dir_file_call_lines lists them."""
    modules: int
    modules_per_package: dict[str, int]
    largest_module: str
    largest_module_lines: int
    longest_function: str
    longest_function_lines: int
    run_dir_file_call_lines: list[str]
    dict_str_any_lines: list[str]
    """The `dict[str, Any]` occurrences outside serializers, one `file:line: code` per occurrence."""
    modules_over_limit: list[str]
    """`file (lines)` of each module over MODULE_LINES lines."""
    functions_over_limit: list[str]
    """`file:function (lines)` of each function over FUNCTION_LINES lines."""


def sources(root: Path) -> list[tuple[str, Path]]:
    out = []
    for base in ("hwprof", "collectors"):
        for path in sorted((root / base).rglob("*.py")):
            out.append((f"{base}/{path.relative_to(root / base)}", path))
    return out


def package_of(rel: str) -> str:
    parts = rel.split("/")
    return "/".join(parts[:-1]) or parts[0]


def function_lengths(tree: ast.AST) -> list[tuple[str, int]]:
    """(name, lines) of every function, decorators excluded."""
    return [
        (node.name, node.end_lineno - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno
    ]


SERIALIZER = re.compile(r"^(to_dict|from_dict|to_json|from_json|to_row|from_row|as_json)$|_(json|dict|rows)$")


def serializer_lines(tree: ast.AST) -> set[int]:
    """Line numbers inside functions that convert to or from JSON (see SERIALIZER)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and SERIALIZER.search(node.name):
            out.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return out


def system_lines(tree: ast.AST, text: str) -> set[int]:
    """Line numbers inside functions that name a /proc or /sys path (see SYSTEM_PATH)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            source = ast.get_source_segment(text, node) or ""
            if SYSTEM_PATH.search(source):
                out.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return out


def measure(root: Path) -> Figures:
    dict_inner = 0
    dict_any = key_gets = chains = calls_ar = calls_out = 0
    per_package: Counter[str] = Counter()
    largest = ("", 0)
    longest = ("", 0)
    run_dir_calls: list[str] = []
    dict_lines: list[str] = []
    big_modules: list[str] = []
    long_functions: list[str] = []
    for rel, path in sources(root):
        text = path.read_text()
        inner = rel.split("/", 1)[1]
        per_package[package_of(rel)] += 1
        lines = text.count("\n")  # as wc -l counts them
        largest = max(largest, (rel, lines), key=lambda x: x[1])
        if lines > MODULE_LINES:
            big_modules.append(f"{rel} ({lines})")
        tree = ast.parse(text)
        boundary = serializer_lines(tree)
        system = system_lines(tree, text)
        for name, n in function_lengths(tree):
            if n > longest[1]:
                longest = (f"{rel}:{name}", n)
            if n > FUNCTION_LINES:
                long_functions.append(f"{rel}:{name} ({n})")
        dict_any += text.count("dict[str, Any]")
        in_schema = inner.startswith(SCHEMA)
        for number, line in enumerate(text.splitlines(), start=1):
            code = line.split("#", 1)[0]
            if number not in boundary and not code.startswith("JsonObject ="):
                found_dicts = code.count("dict[str, Any]")
                dict_inner += found_dicts
                dict_lines += [f"{rel}:{number}: {code.strip()}"] * found_dicts
            if not in_schema and inner.startswith(RUN_READERS):
                key_gets += len(KEY_GET.findall(code))
            if not in_schema and CHAIN.search(code):
                chains += 1
            found = len(FILE_CALL.findall(code))
            if inner.startswith(("analysis/", "render/")):
                calls_ar += found
            if not inner.startswith(READ_WRITE):
                calls_out += found
                if found and number not in system and not rel.startswith(SYSTEM_SIDE) and not NOT_A_FILE.search(code):
                    run_dir_calls += [f"{rel}:{number}: {code.strip()}"] * found
    return Figures(
        dict_any, dict_inner, key_gets, chains, calls_ar, calls_out, len(run_dir_calls), sum(per_package.values()),
        dict(sorted(per_package.items())), largest[0], largest[1], longest[0], longest[1], run_dir_calls,
        dict_lines, big_modules, long_functions,
    )  # fmt: skip


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    root = Path(args[0]) if args else Path(__file__).resolve().parents[1]
    figures = measure(root)
    if "--json" in argv:
        print(json.dumps(asdict(figures), indent=1))
        return 0
    if "--size-report" in argv:
        print(size_report(figures))
        return 0
    for key, value in asdict(figures).items():
        if key == "modules_per_package":
            print("modules per package: " + ", ".join(f"{k} {v}" for k, v in value.items()))
        elif key == "run_dir_file_call_lines":
            if "--where" in argv:
                print("run-directory file calls outside rundir/:\n  " + "\n  ".join(value))
        elif key in ("modules_over_limit", "functions_over_limit"):
            print(f"{key}: {len(value)}" + (": " + ", ".join(value) if value else ""))
        elif key == "dict_str_any_lines":
            if "--dicts" in argv:
                print("dict[str, Any] outside serializers:\n  " + "\n  ".join(value))
        else:
            print(f"{key}: {value}")
    return 0


def size_report(figures: Figures) -> str:
    """The size report tox prints before the tests."""
    lines = [
        f"code size: {len(figures.modules_over_limit)} modules over {MODULE_LINES} lines, "
        f"{len(figures.functions_over_limit)} functions over {FUNCTION_LINES}, "
        f"{figures.dict_str_any_outside_serializers} dict[str, Any] outside serializers "
        "(scripts/code_metrics.py --dicts lists them)"
    ]
    lines += [f"  module {m}" for m in figures.modules_over_limit]
    lines += [f"  function {f}" for f in figures.functions_over_limit]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
