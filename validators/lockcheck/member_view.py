"""One compressed wheel member, known in pieces: a prefix inflated from its start and a tail
inflated back from its end, fetched on demand as an ELF reader seeks around in it.

`MemberStream` is a read-only binary stream over the member: a read of bytes not known yet
fetches them (growing the prefix, or decoding a tail, whichever the compression ratio says
is cheaper). Small members are read whole, which lets their sha256 be checked against the
wheel's RECORD. `MemberStream(..., fetch=False)` serves only what is already known.
"""

from __future__ import annotations

import hashlib
import io
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from validators.lockcheck.deflate_tail import NoBlockStart, decode_tail
from validators.lockcheck.zip_directory import DEFLATED, STORED, Member, ZipFormatError

if TYPE_CHECKING:  # an annotation only: a static --env run reads no HTTP and imports no httpx
    from validators.lockcheck.http_ranges import RemoteFile

WHOLE_BELOW = 1 << 20  # compressed bytes: members this small are read whole (RECORD-checked)
# Inflated bytes one member may hold in memory (prefix): libtorch_cuda.so is ~1.5 GB, and its
# prefix is read only as far as its headers need. A member inflating past its zip entry's
# size is refused as it happens, not after.
MAX_INFLATED = 3 << 30
# Past HELD_FREELY inflated bytes in memory, a member's data may inflate at most HELD_RATIO:1
# (libraries inflate 2-10:1; a zip bomb's 1000:1 is refused at 256 MiB, not at its size).
HELD_FREELY = 256 << 20
HELD_RATIO = 200
FIRST_PREFIX = 1 << 16
TAIL_MARGIN = 256 << 10
# First guesses, as fractions of (uncompressed bytes x the member's ratio): symbol tables and
# strings compress better than the code and GPU blobs that dominate the ratio. A short guess
# costs one more request; a long one costs bytes.
PREFIX_GUESS = 0.6
TAIL_GUESS = 0.7


class NotKnown(Exception):
    """A read touched bytes this view does not have (and may not fetch)."""


class IntegrityError(Exception):
    """A fully read member does not match its RECORD hash or its zip CRC."""


@dataclass
class ReadLog:
    compressed_read: int = 0
    prefix_bytes: int = 0
    tail_from: int | None = None
    whole: bool = False
    sha256_checked: bool = False
    tail_unknown_bytes: int = 0
    record_mismatch: str | None = None  # sha256 read, where the CRC matches but RECORD does not


class MemberView:
    def __init__(
        self, remote: RemoteFile, member: Member, data_start: int, record_sha256: str | None
    ) -> None:
        if member.method not in (DEFLATED, STORED):
            raise ZipFormatError(f"{member.name}: compression method {member.method}")
        self.remote = remote
        self.member = member
        self.start = data_start
        self.end = data_start + member.compressed_size
        self.record_sha256 = record_sha256
        self.size = member.size
        self.ratio = member.compressed_size / max(1, member.size)
        self.log = ReadLog()
        self._prefix = bytearray()
        self._inflater = zlib.decompressobj(wbits=-15)
        self._cpos = data_start  # next compressed byte to inflate
        self._tail_comp = b""  # compressed tail bytes held (ending at self.end)
        self._tail: bytes = b""
        self._tail_start = member.size
        self._tail_unknown: np.ndarray | None = None

    # --- what is known -------------------------------------------------------------------
    def _grow_prefix(self, upto: int) -> None:
        if upto > MAX_INFLATED:
            raise ZipFormatError(
                f"{self.member.name}: reading {upto} inflated bytes of it is past the limit of "
                f"{MAX_INFLATED} bytes in memory"
            )
        while len(self._prefix) < upto and self._cpos < self.end:
            # the ratio measured so far (symbol tables compress better than the member's
            # average), capped at doubling what was read, so an estimate never runs far over
            read = self._cpos - self.start
            ratio = read / len(self._prefix) if self._prefix else self.ratio * PREFIX_GUESS
            want = int((upto - len(self._prefix)) * ratio * 1.1) + 4096
            want = max(FIRST_PREFIX, min(want, max(FIRST_PREFIX, 2 * read)))
            if self.end - self._cpos - want < want // 4:
                want = self.end - self._cpos
            chunk = self.remote.read(self._cpos, min(self.end, self._cpos + want))
            self._cpos += len(chunk)
            self.log.compressed_read += len(chunk)
            if self.member.method == STORED:
                self._prefix += chunk
            else:
                room = self.size - len(self._prefix) + 1
                try:
                    self._prefix += self._inflater.decompress(chunk, room)
                except zlib.error as exc:
                    raise IntegrityError(
                        f"{self.member.name}: deflate data invalid: {exc}"
                    ) from None
                if len(self._prefix) > self.size:
                    raise IntegrityError(
                        f"{self.member.name}: inflates past the {self.size} bytes its zip "
                        "entry declares"
                    )
                _check_ratio(self.member.name, len(self._prefix), self._cpos - self.start)
        self.log.prefix_bytes = len(self._prefix)
        if self._cpos >= self.end:
            self._finish_whole()

    def _finish_whole(self) -> None:
        if self.log.whole:
            return
        self.log.whole = True
        data = bytes(self._prefix)
        if len(data) != self.size:
            raise IntegrityError(
                f"{self.member.name}: inflated {len(data)} bytes, zip says {self.size}"
            )
        if zlib.crc32(data) != self.member.crc32:
            raise IntegrityError(f"{self.member.name}: CRC32 does not match the zip directory")
        if self.record_sha256 is not None:
            got = hashlib.sha256(data).hexdigest()
            # The bytes are the zip's (size and CRC32 match): a RECORD that disagrees was
            # published so (pynvvideocodec 2.0.4's PyNvVideoCodec_1xx modules, RECORD written
            # before a last rewrite). An installer writes these bytes, so they are judged, and
            # the mismatch is reported; a corrupt transfer fails the CRC above.
            if got != self.record_sha256:
                self.log.record_mismatch = got
            else:
                self.log.sha256_checked = True

    def _decode_tail(self, from_offset: int, min_compressed: int = 0) -> None:
        """Make the tail start at or before `from_offset` (and hold at least
        `min_compressed` compressed bytes)."""
        if self.member.method == STORED:  # bytes at their own offsets: read them directly
            begin = max(len(self._prefix), min(from_offset, self.size - min_compressed))
            if begin < self._tail_start:
                more = self.remote.read(self.start + begin, self.start + self._tail_start)
                self.log.compressed_read += len(more)
                self._tail = more + self._tail
                self._tail_start = begin
                self.log.tail_from = begin
            return
        want = max(
            min_compressed, int((self.size - from_offset) * self.ratio * TAIL_GUESS) + TAIL_MARGIN
        )
        have = len(self._tail_comp)
        for _ in range(6):
            want = max(want, have + TAIL_MARGIN)
            begin = max(self._cpos, self.end - want)
            if begin < self.end - have:
                more = self.remote.read(begin, self.end - have)
                self.log.compressed_read += len(more)
                self._tail_comp = more + self._tail_comp
                have = len(self._tail_comp)
            try:
                decoded = decode_tail(self._tail_comp, self.size)
            except NoBlockStart:
                decoded = None
            if decoded is not None:
                _check_ratio(self.member.name, len(decoded.data), have)
            if decoded is not None and decoded.start <= from_offset:
                self._tail = decoded.data
                self._tail_start = decoded.start
                self._tail_unknown = decoded.unknown
                self.log.tail_from = decoded.start
                self.log.tail_unknown_bytes = (
                    0 if decoded.unknown is None else int(decoded.unknown.sum())
                )
                return
            if begin <= self._cpos:
                break
            want = int(want * 1.5)
        self._grow_prefix(self.size)  # give up on the tail: read the member whole

    def read_lenient(self, offset: int, size: int) -> tuple[bytes, np.ndarray | None]:
        """Bytes of [offset, offset+size) with the mask of those copied from before the tail's
        start (None: all known), without moving the tail back for them."""
        end = min(self.size, offset + size)
        self.ensure(offset, size, allow_unknown=True)
        if offset >= self._tail_start:
            rel = offset - self._tail_start
            data = self._tail[rel : rel + (end - offset)]
            mask = None if self._tail_unknown is None else self._tail_unknown[rel : rel + len(data)]
            return data, (mask if mask is not None and mask.any() else None)
        return self.get(offset, size), None

    def ensure(self, offset: int, size: int, *, allow_unknown: bool = False) -> None:
        end = min(self.size, offset + size)
        if end <= len(self._prefix) or (
            offset >= self._tail_start and (allow_unknown or self._known_tail(offset, end))
        ):
            return
        if self.member.compressed_size <= WHOLE_BELOW:
            self._grow_prefix(end)
            return
        prefix_cost = (end - len(self._prefix)) * self.ratio
        tail_cost = (self.size - offset) * self.ratio * 1.3 - len(self._tail_comp)
        if prefix_cost <= tail_cost:
            self._grow_prefix(end)
            return
        self._decode_tail(offset)
        if allow_unknown and offset >= self._tail_start:
            return
        # Bytes copied from before the tail's start stay unknown (a long self-similar run
        # such as .strtab carries them far): start earlier, doubling, while cheaper than
        # the prefix.
        while not self._known_tail(offset, end):
            more = len(self._tail_comp) * 3 // 2
            if more >= (self.end - self._cpos) * 0.9:
                self._grow_prefix(end)
                return
            self._decode_tail(offset, min_compressed=more)

    def _known_tail(self, offset: int, end: int) -> bool:
        if offset < self._tail_start:
            return False
        unknown = self._tail_unknown
        if unknown is None:
            return True
        rel = offset - self._tail_start
        return not bool(unknown[rel : rel + (end - offset)].any())

    def get(self, offset: int, size: int) -> bytes:
        end = min(self.size, offset + size)
        if end <= len(self._prefix):
            return bytes(self._prefix[offset:end])
        if self._known_tail(offset, end):
            rel = offset - self._tail_start
            return self._tail[rel : rel + (end - offset)]
        if offset < len(self._prefix) and end > len(self._prefix):
            head = bytes(self._prefix[offset:])
            return head + self.get(len(self._prefix), end - len(self._prefix))
        raise NotKnown(f"{self.member.name}: bytes {offset}-{end} not read")

    def known_ranges(self, lo: int, hi: int) -> list[tuple[int, int]]:
        """Sub-ranges of [lo, hi) whose bytes are all known (prefix; tail after its last
        unknown byte)."""
        out: list[tuple[int, int]] = []
        if lo < len(self._prefix):
            out.append((lo, min(hi, len(self._prefix))))
        tail_known = self._tail_start
        unknown = self._tail_unknown
        if unknown is not None:
            idx = np.flatnonzero(unknown)
            if len(idx):
                tail_known = self._tail_start + int(idx[-1]) + 1
        a, b = max(lo, tail_known, len(self._prefix)), hi
        if a < b and tail_known < self.size:
            out.append((a, b))
        return out

    def estimated_cost(self, offset: int, size: int) -> int:
        """Compressed bytes a read of [offset, offset+size) would probably fetch now."""
        end = min(self.size, offset + size)
        if self.known(offset, end - offset):
            return 0
        if self.member.compressed_size <= WHOLE_BELOW:
            return self.member.compressed_size - self.log.compressed_read
        prefix = (end - len(self._prefix)) * self.ratio * PREFIX_GUESS
        tail = (self.size - offset) * self.ratio * TAIL_GUESS - len(self._tail_comp)
        return int(max(0, min(prefix, tail)))

    def known(self, offset: int, size: int) -> bool:
        try:
            self.get(offset, size)
        except NotKnown:
            return False
        return True


def _check_ratio(name: str, inflated: int, compressed: int) -> None:
    if inflated > HELD_FREELY and inflated > HELD_RATIO * max(1, compressed):
        raise ZipFormatError(
            f"{name}: {inflated} bytes inflated from {compressed} compressed, past the "
            f"{HELD_RATIO}:1 ratio allowed beyond {HELD_FREELY >> 20} MiB in memory"
        )


class MemberStream(io.RawIOBase):
    """A seekable read-only stream over a MemberView (for the ELF readers)."""

    def __init__(self, view: MemberView, *, fetch: bool = True) -> None:
        super().__init__()
        self.view = view
        self.fetch = fetch
        self.pos = 0
        self.name = view.member.name
        self.overrides: dict[int, bytes] = {}  # offset -> bytes served instead of the member's
        self.names_unreliable = False  # section names read with unknown bytes
        self.synthetic_sections = False  # section table rebuilt from PT_DYNAMIC

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence == 0:
            self.pos = offset
        elif whence == 1:
            self.pos += offset
        else:  # the end includes any patch placed past the member (a rebuilt section table)
            ends = [at + len(patch) for at, patch in self.overrides.items()]
            self.pos = max([self.view.size, *ends]) + offset
        return self.pos

    def tell(self) -> int:
        return self.pos

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            size = self.view.size - self.pos
        size = max(0, size)
        for at, patch in self.overrides.items():  # wholly inside a patch: no fetch
            if at <= self.pos and self.pos + size <= at + len(patch):
                data = patch[self.pos - at : self.pos - at + size]
                self.pos += len(data)
                return data
        size = min(size, max(0, self.view.size - self.pos))
        if self.fetch:
            self.view.ensure(self.pos, size)
        data = self.view.get(self.pos, size)
        for at, patch in self.overrides.items():
            lo, hi = max(at, self.pos), min(at + len(patch), self.pos + len(data))
            if lo < hi:
                data = data[: lo - self.pos] + patch[lo - at : hi - at] + data[hi - self.pos :]
        self.pos += len(data)
        return data

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)
