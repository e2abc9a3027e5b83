"""Issue 23 section 1: the facts cache learns only what the bytes proved. A lock naming the
real (ABI-breaking) torch wheel's sha256 at another URL, whose server serves a harmless torch,
must not make a later check of the real lock PASS; nor may a Range-ignoring server whose
wheel failed its sha256 leave anything behind. Real wheels with real ELF objects (built here),
served by real HTTP servers on 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from tests.helpers.range_server import serve
from tests.validators import elf_env
from tests.validators.test_lockcheck import Built, by_check, check, write_lock
from tests.validators.test_lockcheck import built as built  # the module's wheels, re-used

pytestmark = pytest.mark.skipif(not elf_env.have_compilers(), reason="needs gcc and g++")


def _forged_lock(path: Path, real: Path, served: Path, base: str, kernel: Path) -> Path:
    """The real torch's name and sha256 at another server, serving another wheel's bytes."""
    lock = write_lock(path, base, [served, kernel])
    text = lock.read_text(encoding="utf-8")
    forged = text.replace(
        hashlib.sha256(served.read_bytes()).hexdigest(),
        hashlib.sha256(real.read_bytes()).hexdigest(),
    )
    assert forged != text
    lock.write_text(forged, encoding="utf-8")
    return lock


@pytest.mark.parametrize("mode", ["ranges", "ignore-range"])
def test_forged_url_for_the_real_sha256_does_not_poison_the_real_check(
    built: Built, tmp_path: Path, mode: str
) -> None:
    real = built.wheels["torch-2.10.0"]  # breaks sgl-kernel's ABI
    kernel = built.wheels["sgl-kernel"]
    # the attacker's folder: torch 2.9.1's bytes under 2.10.0's file name
    evil = tmp_path / "evil"
    evil.mkdir()
    shutil.copy(built.wheels["torch-2.9.1"], evil / real.name)
    shutil.copy(kernel, evil / kernel.name)
    cache = tmp_path / "cache"
    with serve(evil, mode) as attacker:
        base = f"http://127.0.0.1:{attacker.server_port}/"
        forged = _forged_lock(tmp_path / "f" / "uv.lock", real, evil / real.name, base, kernel)
        first = by_check(check(forged, cache))
        if mode == "ignore-range":  # streamed whole: the sha256 is checked, and fails
            assert first["static.lock.integrity"].status == "FAIL"
            again = by_check(check(forged, cache))  # and fails again: nothing was cached
            assert again["static.lock.integrity"].status == "FAIL", again
    with serve(built.root) as honest:
        base = f"http://127.0.0.1:{honest.server_port}/"
        lock = write_lock(tmp_path / "l" / "uv.lock", base, [real, kernel])
        results = by_check(check(lock, cache))
    abi = results["static.abi.sgl_kernel"]
    assert abi.status == "FAIL", abi.reason
    assert results["static.lock.fetch"].evidence["bytes_fetched"] > 0
