"""Demangled C++ names made readable: shared by the trace's stacks and the kernels pass's kernel names."""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=1 << 16)
def elide_cpp(frame: str) -> str:
    """A C++ frame with its template arguments and parameter lists elided, "f<…>::call(…)".

    Demangled torch frames run to kilobytes of template arguments; in a stack listing they
    hide the call chain. The innermost frame, the slice's own name, is never elided.
    """
    if "::" not in frame or ("<" not in frame and "(" not in frame):
        return frame
    return _elide_brackets(frame)


def _elide_brackets(frame: str) -> str:
    out: list[str] = []
    depth = 0
    for ch in frame:
        if ch in "<(":
            if depth == 0:
                out.append(ch + "…")
            depth += 1
        elif ch in ">)" and depth:
            depth -= 1
            if depth == 0:
                out.append(ch)
        elif depth == 0:
            out.append(ch)
    return "".join(out) if depth == 0 else frame


def kernel_label(name: str) -> str:
    """A CUDA kernel's demangled name as a reader scans it: no return type, template arguments,
    parameter lists or anonymous namespaces ("void f<float>(int)" -> "f")."""
    text = name.removeprefix("void ").replace("(anonymous namespace)::", "")
    return _elide_brackets(text).replace("<…>", "").replace("(…)", "")
