"""More crafted wheels (issue 23 section 2, variants of the class): names that climb out of
site-packages, entries that overlap (a non-recursive zip bomb's trick), ZIP64 records that lie,
a CRC that lies, a zip bomb nested as a member. Each is a real wheel file served by a real HTTP
server on 127.0.0.1 and read by the pre-install verdict (run_lock_check), as in
test_lockcheck_hostile.py.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tests.helpers.hostile import (
    crafted_wheel,
    deflated_member,
    hostile_server,
    raw_zip,
    stored_member,
)
from tests.validators.test_lockcheck_hostile import LIB, members, run_check, write_lock


def _overlapping() -> bytes:
    """A second central entry, another name, at the first entry's local header."""
    ms = members()
    body = raw_zip(ms)
    cd_start = body.index(b"PK\x01\x02")
    first = body[cd_start : cd_start + 46] + b"evil/lic.so"
    end = body.rindex(b"PK\x05\x06")
    cd = body[cd_start:end] + first
    n = len(ms) + 1
    return body[:cd_start] + cd + b"PK\x05\x06" + struct.pack("<HHHHIIH", 0, 0, n, n, len(cd),
                                                              cd_start, 0)  # fmt: skip


def _zip64(locator_offset: int | None) -> bytes:
    """An end record saying ZIP64, and a locator pointing past the file (None: at a ZIP64
    end record whose directory is 1 GB at offset 1e15)."""
    body = raw_zip(members())
    end = body.rindex(b"PK\x05\x06")
    tail = bytearray(body[end:])
    struct.pack_into("<HHII", tail, 8, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF)
    if locator_offset is not None:
        locator = b"PK\x06\x07" + struct.pack("<IQI", 0, locator_offset, 1)
        return body[:end] + locator + bytes(tail)
    record = b"PK\x06\x06" + struct.pack("<QHHIIQQQQ", 44, 45, 45, 0, 0, 3, 3, 10**9, 10**15)
    locator = b"PK\x06\x07" + struct.pack("<IQI", 0, end, 1)
    return body[:end] + record + locator + bytes(tail)


MALFORMED = {
    "a second entry of one name": (
        lambda: raw_zip([*members(), deflated_member("evil/lib.so", b"\x7fELF" + b"\0" * 64)]),
        "two entries of one name",
    ),
    "a name climbing out with ..": (
        lambda: raw_zip(members(lib=deflated_member("../../evil/lib.so", LIB))),
        "../../evil/lib.so: an absolute name or one climbing out with '..'",
    ),
    "a name climbing out in the middle": (
        lambda: raw_zip(members(lib=deflated_member("evil/../../../lib.so", LIB))),
        "climbing out with '..'",
    ),
    "an absolute name": (
        lambda: raw_zip(members(lib=deflated_member("/etc/evil/lib.so", LIB))),
        "/etc/evil/lib.so: an absolute name",
    ),
    "a NUL in a name": (
        lambda: raw_zip(members(lib=deflated_member("evil/lib\x00.so", LIB))),
        "empty name or a NUL in it",
    ),
    "overlapping entries": (_overlapping, "evil/lic.so: its entry overlaps the data of evil/lib.so"),
    "ZIP64 locator past the end": (lambda: _zip64(10**12), "is past the locator"),
    "ZIP64 end record lying about its directory": (lambda: _zip64(None), "more than the limit"),
}


@pytest.mark.parametrize("attack", list(MALFORMED))
def test_malformed_wheel_is_refused_naming_it(attack: str, tmp_path: Path) -> None:
    make, said = MALFORMED[attack]
    wheel = crafted_wheel(tmp_path / "served", "evil", "1.0", make())
    with hostile_server(tmp_path / "served") as server:
        lock = write_lock(tmp_path / "uv.lock", server.base + wheel.name, wheel.read_bytes())
        results = run_check(lock, tmp_path / "cache")
    bad = results.get("static.lock.wheels")
    assert bad is not None and bad.status == "ERROR", {k: r.reason for k, r in results.items()}
    assert wheel.name in bad.reason and said in bad.reason, bad.reason


def test_a_crc_that_lies_fails_integrity_naming_the_member(tmp_path: Path) -> None:
    body = raw_zip(members(lib=deflated_member("evil/lib.so", LIB, crc32=1234)))
    wheel = crafted_wheel(tmp_path / "served", "evil", "1.0", body)
    with hostile_server(tmp_path / "served") as server:
        lock = write_lock(tmp_path / "uv.lock", server.base + wheel.name, wheel.read_bytes())
        results = run_check(lock, tmp_path / "cache")
    integrity = results["static.lock.integrity"]
    assert integrity.status == "FAIL"
    assert "evil/lib.so: CRC32 does not match the zip directory" in integrity.reason


def test_a_nested_zip_bomb_is_never_opened(tmp_path: Path) -> None:
    """A member that is itself a zip of 50 MiB of zeros: the verdict reads shared objects and
    metadata, never inside a nested archive, so the bomb stays ~50 KiB of bytes."""
    inner = raw_zip([deflated_member("z", b"\0" * (50 << 20))])
    wheel = crafted_wheel(tmp_path / "served", "evil", "1.0",
                          raw_zip([*members(), stored_member("evil/inner.zip", inner)]))  # fmt: skip
    with hostile_server(tmp_path / "served") as server:
        lock = write_lock(tmp_path / "uv.lock", server.base + wheel.name, wheel.read_bytes())
        results = run_check(lock, tmp_path / "cache")
    assert "static.lock.wheels" not in results
    assert results["static.lock.fetch"].status == "PASS"
    assert "fetched 0.1 MB of 0.1 MB" in results["static.lock.fetch"].reason
