"""stackgate.gc_paused: the collector is off inside the block and as it was after, on an
exception too."""

from __future__ import annotations

import gc

import pytest

from stackgate.gc_paused import collector_paused


def test_off_inside_and_restored_after() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_restored_after_an_exception_and_left_off_when_it_was_off() -> None:
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("x")
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
