"""gc_paused: Python's collector off inside the block and as it was after, on an error too."""

from __future__ import annotations

import gc

import pytest

from hwprof.core.gc_pause import gc_paused


def test_the_collector_is_off_inside_and_on_again_after_even_on_an_error() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("a collector's close failed")
    assert gc.isenabled()


def test_a_caller_that_had_it_off_keeps_it_off() -> None:
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
