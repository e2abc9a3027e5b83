"""Inflate the END of a deflate stream without its beginning.

Blocks start at bit positions and may copy from the 32 KiB of output before them, so this finds
a block start in the stream's last bytes and inflates to the end twice, the unknown window
stood in for with 0x00 and with 0xFF bytes: output that differs was copied from before the
start and is marked unknown. The output's place is known because it ends where the member ends.
This makes patchelf-rewritten libraries (libtorch_cpu and libtorch_cuda keep .dynstr at their
very end) cheap: their tail is read instead of the whole member. The idea underlies rapidgzip
(Knespel & Brunst, 2023); no code of theirs is used.

Dynamic-Huffman block starts (a complete code-length code, as zlib insists) and stored-block
starts (LEN and NLEN complementary) are tried; a candidate must inflate without error exactly
to the stream's end.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

WINDOW = 32768
_CHUNK = 1 << 14  # search windows: zlib's blocks are tens of KiB apart


class NoBlockStart(Exception):
    """No block start in the given bytes inflates to the end of the stream."""


@dataclass(frozen=True)
class TailDecode:
    start: int  # offset in the uncompressed member of data[0]
    data: bytes
    unknown: (
        np.ndarray | None
    )  # bool per byte (True: copied from before the start), None: all known
    compressed_skipped: int  # compressed bytes before the block start that were not used


def shifted(data: bytes, bitpos: int) -> bytes:
    """`data` from bit `bitpos` on, realigned to a byte boundary (LSB-first bit order)."""
    byte, bit = divmod(bitpos, 8)
    rest = data[byte:]
    if bit == 0:
        return rest
    value = int.from_bytes(rest, "little") >> bit
    return value.to_bytes(len(rest), "little")


def _candidates(bits: np.ndarray, first: int, last: int) -> np.ndarray:
    """Bit positions in [first, last) that could start a dynamic-Huffman block.

    Shifted views of one bit array, no gathers (gathering per candidate would take much of a
    cold lock check's CPU)."""
    last = min(last, len(bits) - 17 - 57)
    if last <= first:
        return np.zeros(0, dtype=np.int64)

    def at(offset: int) -> np.ndarray:
        return bits[first + offset : last + offset].astype(np.int16)

    def field(offset: int, width: int) -> np.ndarray:
        value = at(offset)
        for i in range(1, width):
            value = value | (at(offset + i) << i)
        return value

    ok = (at(1) == 0) & (at(2) == 1)  # BTYPE 10: dynamic Huffman
    ok &= (field(3, 5) <= 29) & (field(8, 5) <= 29)  # HLIT, HDIST in range
    ncl = field(13, 4) + 4
    kraft = np.zeros(last - first, dtype=np.int16)
    for j in range(19):
        length = field(17 + 3 * j, 3)
        used = (j < ncl) & (length > 0)
        kraft += np.where(used, np.left_shift(1, 7 - np.clip(length, 1, 7)), 0).astype(np.int16)
    found: np.ndarray = np.flatnonzero(ok & (kraft == 128)).astype(np.int64) + first
    return found


def _stored_candidates(data: bytes, first: int, last: int) -> np.ndarray:
    """Bit positions of possible stored-block headers (BTYPE 00): LEN and its complement
    NLEN at a byte boundary, the 3 header bits in the byte before (zlib emits stored blocks
    for incompressible runs, e.g. the embedded fatbins in cuFFT's .ldata)."""
    arr = np.frombuffer(data, dtype=np.uint8).astype(np.uint16)
    last = min(last, len(arr) - 4)
    if last <= max(first, 1):
        return np.zeros(0, dtype=np.int64)
    q = np.arange(max(first, 1), last, dtype=np.int64)
    length = arr[q] | (arr[q + 1] << 8)
    nlength = arr[q + 2] | (arr[q + 3] << 8)
    q = q[(length ^ nlength) == 0xFFFF]
    out: list[int] = []
    for byte in q.tolist():
        prev = int(data[byte - 1])
        for k in range(6):  # header bits k..k+2 in the previous byte, padding after
            if (prev >> (k + 1)) & 0b11 == 0 and (prev >> (k + 3)) == 0:
                out.append((byte - 1) * 8 + k)
    return np.array(sorted(out), dtype=np.int64)


def _inflate(data: bytes, fill: int, max_out: int) -> tuple[bytes, bool, int]:
    """Inflate at most max_out + 1 bytes (a tail longer than its member is not the tail)."""
    d = zlib.decompressobj(wbits=-15, zdict=bytes([fill]) * WINDOW)
    out = d.decompress(data, max_out + 1)
    return out, d.eof and not d.unconsumed_tail, len(d.unused_data)


def _quick_ok(data: bytes) -> bool:
    d = zlib.decompressobj(wbits=-15, zdict=b"\0" * WINDOW)
    try:
        d.decompress(data[:16384], 1 << 20)
    except zlib.error:
        return False
    return True


def decode_tail(compressed: bytes, member_size: int, *, search_bytes: int = 4 << 20) -> TailDecode:
    """Inflate from the first usable block start within the first `search_bytes` of
    `compressed` (the last bytes of one member's deflate stream) to the stream's end."""
    limit = min(len(compressed), search_bytes)
    for chunk_start in range(0, limit, _CHUNK):
        window = compressed[chunk_start : min(len(compressed), chunk_start + _CHUNK + 64)]
        bits = np.unpackbits(np.frombuffer(window, dtype=np.uint8), bitorder="little")
        span = min(_CHUNK, limit - chunk_start)
        found = np.union1d(_candidates(bits, 0, span * 8), _stored_candidates(window, 0, span))
        for rel in found.tolist():
            bitpos = chunk_start * 8 + rel
            head = shifted(compressed[bitpos // 8 : bitpos // 8 + 20000], bitpos % 8)
            if not _quick_ok(head):
                continue
            stream = shifted(compressed, bitpos)
            try:
                out0, eof, unused = _inflate(stream, 0x00, member_size)
            except zlib.error:
                continue
            if not eof or unused > 1 or len(out0) > member_size:
                continue
            out1, _, _ = _inflate(stream, 0xFF, member_size)
            a = np.frombuffer(out0, dtype=np.uint8)
            b = np.frombuffer(out1, dtype=np.uint8)
            unknown = a != b
            return TailDecode(
                start=member_size - len(out0),
                data=out0,
                unknown=unknown if unknown.any() else None,
                compressed_skipped=bitpos // 8,
            )
    raise NoBlockStart(f"no deflate block start found in the first {limit} bytes")
