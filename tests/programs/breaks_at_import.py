"""detect_like.py that fails at import where BREAK_AT_IMPORT is set in its environment: a program whose
environment changed between its collect and its advise (a module uninstalled, another virtual environment).

    BREAK_AT_IMPORT=1 python tests/programs/breaks_at_import.py [detect_like.py's options]
"""

from __future__ import annotations

import os

if os.environ.get("BREAK_AT_IMPORT"):
    import nonexistent_module_xyz  # type: ignore[import-not-found]  # noqa: F401

from detect_like import detect, parse_args

if __name__ == "__main__":
    print(f"{detect(parse_args())} images done")
