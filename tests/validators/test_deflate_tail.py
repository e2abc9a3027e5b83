"""Inflating the end of a real deflate stream without its beginning."""

from __future__ import annotations

import random
import zlib

import numpy as np
import pytest

from validators.lockcheck.deflate_tail import NoBlockStart, decode_tail


def _symbol_like(n: int, seed: int) -> bytes:
    """Mangled-name-like text (what .dynstr holds): compressible, self-similar."""
    rng = random.Random(seed)
    words = ["c10", "cuda", "MessageLogger", "Tensor", "at", "native", "impl", "torch", "ops"]
    out = bytearray()
    while len(out) < n:
        parts = [rng.choice(words) for _ in range(rng.randint(2, 6))]
        out += (
            "_ZN" + "".join(f"{len(p)}{p}" for p in parts) + f"E{rng.randint(0, 999)}\0"
        ).encode()
    return bytes(out[:n])


@pytest.mark.parametrize("level", [1, 6, 9])
def test_tail_of_a_dynamic_huffman_stream(level: int) -> None:
    data = _symbol_like(3 << 20, seed=level)
    comp = zlib.compressobj(level, zlib.DEFLATED, -15)
    stream = comp.compress(data) + comp.flush()
    tail = stream[-len(stream) // 4 :]
    decoded = decode_tail(tail, len(data))
    assert 0 < decoded.start < len(data)
    got = np.frombuffer(decoded.data, dtype=np.uint8)
    want = np.frombuffer(data[decoded.start :], dtype=np.uint8)
    known = np.ones(len(got), dtype=bool) if decoded.unknown is None else ~decoded.unknown
    assert (got[known] == want[known]).all()  # every byte said known is right
    # bytes copied from before the start are unknown, never guessed: with this self-similar
    # text (like .strtab) they can persist far, which is why the reader starts earlier
    assert known.any()


def test_tail_of_incompressible_data_uses_stored_blocks() -> None:
    data = random.Random(7).randbytes(2 << 20)
    comp = zlib.compressobj(6, zlib.DEFLATED, -15)
    stream = comp.compress(data) + comp.flush()
    decoded = decode_tail(stream[-300_000:], len(data))
    assert decoded.unknown is None
    assert decoded.data == data[decoded.start :]


def test_bytes_that_are_no_deflate_stream_are_refused() -> None:
    with pytest.raises(NoBlockStart):
        decode_tail(bytes(200_000), 10 << 20)
