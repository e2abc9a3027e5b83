"""The free-disk estimate counts every wheel a lock installs by its real size, or names it.

Real wheel files (tests.helpers.wheels) sit where a uv.lock's `path` entries point, relative
to the lock's folder as uv writes them and absolute; the lock text has the fields uv writes
for a file:// index (path, hash, no size), a remote index (url, hash, size), a path-sourced
wheel (source path, wheels[].filename) and sdist/git packages.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from builder.venv.disk_room import UNPACKED_RATIO, require_room, room_for
from builder.venv.lock_sizes import lock_sizes
from stackgate.errors import HostCannot
from stackgate.layout import LockFiles
from stackgate.lock.state import LockState
from stackgate.lock.uvlock import read_uv_lock
from tests.helpers.small_disk import small_tmpfs
from tests.helpers.wheels import make_wheel

H = "sha256:" + "0" * 64


def _lock(folder: Path, packages: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "uv.lock"
    path.write_text(
        'version = 1\nrevision = 3\nrequires-python = "==3.11.*"\n\n'
        '[[package]]\nname = "proj"\nversion = "0"\nsource = { virtual = "." }\n\n' + packages
    )
    return path


def _blob(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)  # incompressible: the wheel is ~n bytes


def test_local_wheels_are_counted_by_their_files(tmp_path: Path) -> None:
    lock_dir = tmp_path / "locks" / "mine"
    rel = make_wheel(tmp_path / "idx", "relpkg", "1.0", files={"relpkg/b.bin": _blob(300_000, 1)})
    absw = make_wheel(tmp_path / "abs", "abspkg", "2.0", files={"abspkg/b.bin": _blob(200_000, 2)})
    srcw = make_wheel(lock_dir / "wheels", "srcpkg", "3.0", files={"srcpkg/b": _blob(50_000, 3)})
    lockfile = _lock(
        lock_dir,
        f"""[[package]]
name = "relpkg"
version = "1.0"
source = {{ registry = "../../idx" }}
wheels = [{{ path = "../../idx/{rel.name}", hash = "{H}" }}]

[[package]]
name = "abspkg"
version = "2.0"
source = {{ registry = "{absw.parent}" }}
wheels = [{{ path = "{absw}", hash = "{H}" }}]

[[package]]
name = "srcpkg"
version = "3.0"
source = {{ path = "wheels/{srcw.name}" }}
wheels = [{{ filename = "{srcw.name}", hash = "{H}" }}]

[[package]]
name = "remote"
version = "4.0"
source = {{ registry = "https://pypi.org/simple" }}
wheels = [
    {{ url = "https://files.example/remote-4.0-cp311-cp311-manylinux_2_17_x86_64.whl", hash = "{H}", size = 7000000 }},
    {{ url = "https://files.example/remote-4.0-cp311-cp311-win_amd64.whl", hash = "{H}", size = 99000000 }},
]
""",
    )
    sizes = lock_sizes(read_uv_lock(lockfile), lockfile)
    got = {w.name: w.size for w in sizes.wheels}
    assert got == {
        "relpkg": rel.stat().st_size,
        "abspkg": absw.stat().st_size,
        "srcpkg": srcw.stat().st_size,
        "remote": 7_000_000,  # the Linux wheel, not the larger Windows one
    }
    assert rel.stat().st_size > 300_000 and sizes.unknown == []
    room = room_for(read_uv_lock(lockfile), lockfile, tmp_path / "envs", None)
    assert room.wheels_bytes == sum(got.values())
    assert room.env_bytes == int(sum(got.values()) * UNPACKED_RATIO) and room.unknown == ()


def test_what_cannot_be_sized_is_named_not_counted_as_zero(tmp_path: Path) -> None:
    lock_dir = tmp_path / "lock"
    ok = make_wheel(tmp_path / "idx", "okpkg", "1.0", files={"okpkg/b.bin": _blob(10_000, 4)})
    lockfile = _lock(
        lock_dir,
        f"""[[package]]
name = "okpkg"
version = "1.0"
source = {{ registry = "../idx" }}
wheels = [{{ path = "../idx/{ok.name}", hash = "{H}" }}]

[[package]]
name = "gone"
version = "1.0"
source = {{ registry = "../idx" }}
wheels = [{{ path = "../idx/gone-1.0-py3-none-any.whl", hash = "{H}" }}]

[[package]]
name = "nosize"
version = "1.0"
source = {{ registry = "https://pypi.org/simple" }}
wheels = [{{ url = "https://files.example/nosize-1.0-py3-none-any.whl", hash = "{H}" }}]

[[package]]
name = "sdistonly"
version = "1.0"
source = {{ registry = "https://pypi.org/simple" }}
sdist = {{ url = "https://files.example/sdistonly-1.0.tar.gz", hash = "{H}", size = 5000 }}

[[package]]
name = "fromgit"
version = "0.1"
source = {{ git = "https://example.org/fromgit?rev=main#{"a" * 40}" }}

[[package]]
name = "winonly"
version = "1.0"
source = {{ registry = "https://pypi.org/simple" }}
wheels = [{{ url = "https://files.example/winonly-1.0-cp311-cp311-win_amd64.whl", hash = "{H}", size = 10 }}]
""",
    )
    sizes = lock_sizes(read_uv_lock(lockfile), lockfile)
    assert [(w.name, w.size) for w in sizes.wheels] == [("okpkg", ok.stat().st_size)]
    unknown = "\n".join(sizes.unknown)
    assert len(sizes.unknown) == 5, unknown
    assert f"gone 1.0: {lock_dir / '../idx/gone-1.0-py3-none-any.whl'}: No such file" in unknown
    assert "nosize 1.0: the lock gives no size" in unknown
    assert "sdistonly 1.0: built on install from an sdist" in unknown
    assert "fromgit 0.1: built on install from a git source" in unknown
    assert "winonly 1.0: no wheel in the lock fits this target" in unknown
    room = room_for(read_uv_lock(lockfile), lockfile, tmp_path / "envs", None)
    assert room.unknown == tuple(sizes.unknown)


def test_without_one_target_python_the_largest_wheel_counts(tmp_path: Path) -> None:
    """A lock for several Pythons cannot say which wheel installs: the largest is counted."""
    lockfile = _lock(
        tmp_path / "lock",
        f"""[[package]]
name = "multi"
version = "1.0"
source = {{ registry = "https://pypi.org/simple" }}
wheels = [
    {{ url = "https://files.example/multi-1.0-cp311-cp311-manylinux_2_17_x86_64.whl", hash = "{H}", size = 100 }},
    {{ url = "https://files.example/multi-1.0-cp312-cp312-manylinux_2_17_x86_64.whl", hash = "{H}", size = 300 }},
]
""",
    )
    text = lockfile.read_text().replace('"==3.11.*"', '">=3.11"')
    lockfile.write_text(text)
    sizes = lock_sizes(read_uv_lock(lockfile), lockfile)
    assert [(w.name, w.size) for w in sizes.wheels] == [("multi", 300)]


def _state(lockfile: Path) -> LockState:
    return LockState(LockFiles(lockfile.parent), "m" * 64, "l" * 64, {}, read_uv_lock(lockfile))


def test_the_refusal_and_the_passing_check_name_what_was_not_counted(tmp_path: Path) -> None:
    """On a real 3 MiB tmpfs: a 2 MiB local wheel (4 MiB unpacked) is refused, exit 3, and the
    refusal names the sdist it could not size; on a roomy folder the check passes with a note."""
    big = make_wheel(tmp_path / "idx", "big", "1.0", files={"big/b.bin": _blob(2 << 20, 5)})
    lockfile = _lock(
        tmp_path / "lock",
        f"""[[package]]
name = "big"
version = "1.0"
source = {{ registry = "../idx" }}
wheels = [{{ path = "../idx/{big.name}", hash = "{H}" }}]

[[package]]
name = "sdistonly"
version = "1.0"
source = {{ registry = "https://pypi.org/simple" }}
sdist = {{ url = "https://files.example/sdistonly-1.0.tar.gz", hash = "{H}", size = 5000 }}
""",
    )
    state = _state(lockfile)
    notes = require_room(state, "mine", tmp_path / "envs", None)
    assert notes == [
        "free-disk check: size unknown, not counted (1): sdistonly 1.0: built on install from "
        "an sdist (no wheel in the lock)"
    ]
    with small_tmpfs(tmp_path, size_mb=3) as disk, pytest.raises(HostCannot) as refused:
        require_room(state, "mine", disk / "envs", None)
    lines = refused.value.lines()
    assert lines[0].startswith("not enough free disk to build mine: about "), lines
    assert "MiB needed" in lines[0], lines
    assert any("size unknown, not counted (1): sdistonly 1.0" in line for line in lines), lines
    assert refused.value.exit_code == 3
