"""The public API is what the documentation's Python API page (docs/python-api.md) documents in its table: each
name there exists, is declared to return what the table says, and (on a recorded run) returns it; hwprof exports
nothing the table does not name."""

from __future__ import annotations

import inspect
import re
import typing
from functools import cached_property
from pathlib import Path
from typing import Any

import matplotlib.figure
import polars
import pytest
from rich.console import Console

import hwprof
import hwprof.api.run as api_run
from hwprof.analysis.gate.verdict import Verdict
from hwprof.analysis.roofline import Roof
from hwprof.analysis.sweep.rows import SweepResult
from hwprof.schema.host import HostDoc
from hwprof.schema.run import ModelDoc, RunConfigDoc, RunDoc, RuntimeDoc

API_PAGE = Path(__file__).resolve().parents[1] / "docs" / "python-api.md"
FIXTURE = Path(__file__).parent / "fixtures" / "rundir_report"
ROW = re.compile(r"^\| `(?P<name>[^`]+)` \| (?P<gives>.+) \|$")
CALL_ARGS = {"table": ("layers",), "why": ("energy_j",), "unit": ("time_ms",)}
"""Arguments for the documented methods that take one, to call them on the recorded run."""
NOT_CALLED = {"report", "to_pandas"}
"""Documented methods that print or need an optional package: their declared return is checked, not a call."""


def documented() -> list[tuple[str, str]]:
    """(name as written, what it gives) for each row of the Python API page's table of the public names."""
    text = API_PAGE.read_text()
    section = text[text.index("\n## The public names\n") :]
    section = section[: section.index("\n## ", 1)]
    rows = [ROW.match(line.replace("\\|", "|")) for line in section.splitlines()]
    return [(m["name"], m["gives"].strip()) for m in rows if m]


WORDS = object()
"""type_of's answer for a cell in words (a class, an exception), not a type."""


def type_of(gives: str) -> Any:
    """The Python type a "gives" cell names (`polars.DataFrame | None`), or WORDS for words."""
    if not gives.startswith("`"):
        return WORDS
    names = {
        "polars": polars,
        "Figure": matplotlib.figure.Figure,
        "Run": hwprof.Run,
        "NotMeasured": hwprof.NotMeasured,
        "Path": Path,
        "RunDoc": RunDoc,
        "ModelDoc": ModelDoc,
        "HostDoc": HostDoc,
        "RunConfigDoc": RunConfigDoc,
        "RuntimeDoc": RuntimeDoc,
        "Roof": Roof,
        "Verdict": Verdict,
        "SweepResult": SweepResult,
    }
    if "pandas." in gives:
        return "pandas.DataFrame"
    found = eval(gives.strip("`"), names)
    return type(None) if found is None else found


def declared_return(owner: object, attr: str) -> Any:
    """What a function, method, property or attribute is annotated to give (TYPE_CHECKING names resolved)."""
    space = {**vars(api_run), "Figure": matplotlib.figure.Figure, "Roof": Roof, "RunDoc": RunDoc}
    space |= {"ModelDoc": ModelDoc, "HostDoc": HostDoc, "RunConfigDoc": RunConfigDoc, "RuntimeDoc": RuntimeDoc}
    space |= {"Console": Console, "Verdict": Verdict, "SweepResult": SweepResult}
    if inspect.isclass(owner) and attr in owner.__annotations__:  # an attribute every instance has
        return typing.get_type_hints(owner, globalns=space)[attr]
    member = inspect.getattr_static(owner, attr) if inspect.isclass(owner) else getattr(owner, attr)
    func = (
        member.fget if isinstance(member, property) else member.func if isinstance(member, cached_property) else member
    )
    func = getattr(func, "__func__", func)
    space |= vars(inspect.getmodule(func))
    try:
        import pandas

        space["pandas"] = pandas
    except ImportError:
        pass
    ann = func.__annotations__.get("return")
    if isinstance(ann, str) and ann.startswith("pandas."):
        return ann
    return typing.get_type_hints(func, globalns=space)["return"] if "return" in func.__annotations__ else None


@pytest.fixture(scope="module")
def run() -> hwprof.Run:
    return hwprof.load(FIXTURE)


def test_the_table_is_there() -> None:
    names = [n for n, _ in documented()]
    assert "hwprof.load(path)" in names and "Run.layers" in names and len(names) > 30


def test_hwprof_exports_what_the_docs_name_and_nothing_else() -> None:
    top = {re.match(r"hwprof\.(\w+)", n)[1] for n, _ in documented() if n.startswith("hwprof.")}  # type: ignore[index]
    assert set(hwprof.__all__) - {"__version__"} == top


@pytest.mark.parametrize(("name", "gives"), documented())
def test_each_documented_name(name: str, gives: str, run: hwprof.Run) -> None:
    owner_name, _, rest = name.partition(".")
    attr = re.match(r"\w+", rest)[0]  # type: ignore[index]
    owner: object = hwprof if owner_name == "hwprof" else hwprof.Run
    assert hasattr(owner, attr) or attr in hwprof.Run.__annotations__, name
    expected = type_of(gives)
    if expected is WORDS:  # a class or an exception, named in words
        assert inspect.isclass(getattr(owner, attr)), name
        return
    declared = declared_return(owner, attr)
    assert declared == expected, (name, declared, expected)
    if "(" in rest:  # documented parameters are the function's
        params = [p.split("=")[0].strip().lstrip("*") for p in rest[rest.index("(") + 1 : -1].split(",") if p.strip()]
        target = getattr(owner, attr)
        signature = inspect.signature(target)
        assert all(p in signature.parameters for p in params), (name, list(signature.parameters))
    if owner is hwprof.Run and attr not in NOT_CALLED:
        value = getattr(run, attr)
        if callable(value):
            value = value(*CALL_ARGS.get(attr, ()))
        assert conforms(value, expected), (name, type(value))


def conforms(value: object, expected: Any) -> bool:
    """isinstance for the documented types: None, unions, list[X] (every item an X)."""
    if expected is None:
        return value is None
    args = typing.get_args(expected)
    if typing.get_origin(expected) is list:
        return isinstance(value, list) and all(conforms(v, args[0]) for v in value)
    if args:  # X | None
        return any(conforms(value, a if a is not type(None) else None) for a in args)
    return isinstance(value, expected)
