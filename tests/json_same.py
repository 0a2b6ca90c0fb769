"""One JSON value against another, floats to 1e-9 (another numpy, or another order of summing, moves the last
digits): what the golden-file and regenerated-fixture tests compare (test_report, test_gpu_import_run)."""

from __future__ import annotations

import math
from typing import Any


def assert_same_json(a: Any, b: Any, path: str = "$", key_order: bool = False) -> None:
    """a == b, floats to rel 1e-9 (abs 1e-12); objects with the same keys (in the same order with key_order);
    the failing path named ("$.passes.gpu[3]")."""
    if isinstance(a, float) or isinstance(b, float):
        assert isinstance(a, int | float) and isinstance(b, int | float), f"{path}: {a!r} != {b!r}"
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), f"{path}: {a!r} != {b!r}"
    elif isinstance(a, dict):
        assert isinstance(b, dict), f"{path}: {a!r} != {b!r}"
        if key_order:
            assert list(a) == list(b), f"{path}: keys {list(a)} != {list(b)}"
        else:
            assert a.keys() == b.keys(), f"{path}: keys {sorted(a)} != {sorted(b)}"
        for key in a:
            assert_same_json(a[key], b[key], f"{path}.{key}", key_order)
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{path}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same_json(x, y, f"{path}[{i}]", key_order)
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"
