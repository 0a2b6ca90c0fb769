"""Typed polars tables from dataclass rows: one dtype per column, from the dataclass's own annotations.

A column's dtype is what its field is declared as (`float | None` -> Float64, `int` -> Int64, `str` ->
String, `bool` -> Boolean, `list[str]` -> List(String)), not what the values of one run happen to be: a
figure no layer of this run measured is still a Float64 column of nulls, so tables of two runs stack
(`pl.concat`) and compare. A column no field declares (a collector's own `<collector>.<metric>`) is given
its dtype by the caller or inferred from all its values.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

DTYPES: dict[object, pl.DataType] = {
    int: pl.Int64(),
    float: pl.Float64(),
    str: pl.String(),
    bool: pl.Boolean(),
}


def dtype_of(hint: object) -> pl.DataType | None:
    """The polars dtype of a field's annotation (Optional unwrapped); None where the table infers it."""
    args = typing.get_args(hint)
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        present = [a for a in args if a is not type(None)]
        return dtype_of(present[0]) if len(present) == 1 else None
    if origin in (list, tuple) and args:
        inner = dtype_of(args[0])
        return pl.List(inner) if inner is not None else None
    return DTYPES.get(hint)


@functools.cache
def field_dtypes(cls: type, prefix: str = "") -> dict[str, pl.DataType]:
    """Column name (`prefix` + field name) -> dtype of every field of a dataclass that has one."""
    hints = typing.get_type_hints(cls)
    out = {}
    for f in dataclasses.fields(cls):
        dtype = dtype_of(hints[f.name])
        if dtype is not None:
            out[prefix + f.name] = dtype
    return out


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], dtypes: Mapping[str, pl.DataType]) -> pl.DataFrame:
    """The rows as a DataFrame with these columns in this order: a declared column gets its dtype, another is
    inferred from all its rows; a key a row lacks is null there."""
    schema: dict[str, pl.DataType | None] = {c: dtypes.get(c) for c in columns}
    return pl.from_dicts(list(rows), schema=schema, infer_schema_length=None)
