"""Python's cyclic garbage collector held off while a block runs, as it was again after.

A build's hashing makes ~58k small long-lived objects (a digest per file, RECORD rows), none
in reference cycles; each allocation burst triggers collections that walk every object alive,
which a profile of a cu128 build put at ~5 % of its CPU samples (benchmarks/builder/results/
build_vs_sync.md). Reference counting still frees everything acyclic at once; cycles made
inside the block (an exception's traceback) wait until it ends.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """The collector off inside the block; on after it only if it was on before."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
