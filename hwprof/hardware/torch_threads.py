"""torch's intra-op thread count for a block of work, restored after it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run the block with torch.set_num_threads(n), the previous count set back after it (a no-op when equal:
    setting the count on every iteration of a loop costs nothing then)."""
    import torch

    before = torch.get_num_threads()
    if n != before:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if n != before:
            torch.set_num_threads(before)
