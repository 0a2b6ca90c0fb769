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
