"""Credentials never shown: the password of a URI's user information (`scheme://user:PASSWORD@host`) masked in
every text hwprof prints or keeps (console lines, run.json's command, the trace, MLflow's parameters and errors).

A lone user part (`https://TOKEN@host`) is masked whole: services take tokens there. The scheme must be one (a
letter, then letters, digits, `+`, `-` or `.`, then `://`), so that text such as `a:b@c` in a sentence is left
alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MASK = "***"
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^\s/@:]*)(?::[^\s/@]*)?@")


def _mask(match: re.Match[str]) -> str:
    scheme, user = match["scheme"], match["user"]
    has_password = match.group(0) != f"{scheme}{user}@"
    return f"{scheme}{user}:{MASK}@" if has_password and user else f"{scheme}{MASK}@"


def masked(text: str) -> str:
    """`text` with each URI's password (or lone user part) replaced by ***."""
    return _USERINFO.sub(_mask, text)


def masked_words(words: Iterable[str]) -> list[str]:
    """Each word masked (a command line)."""
    return [masked(str(w)) for w in words]
