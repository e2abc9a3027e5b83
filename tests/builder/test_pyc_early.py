"""`.pyc` put in place while uv installs (builder.venv.pyc_early), on real uv installs of real
wheels into real venvs, the real early reader and the env's own interpreter: a source read early
gets its stored `.pyc` before the byte-code step, which then only confirms it; a placement made
stale (the source replaced, the `.pyc` written through its link, the source gone) is put or
compiled again or removed, so the env ends with what the step alone would have made; a `.pyc` a
wheel ships is never replaced early; a failing hook fails the build's read."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from builder.venv import bytecode
from builder.venv.pyc_early import EarlyPyc, known_digests
from stackgate.build_record import BytecodeRecord
from stackgate.envtree import digest_patterns, file_digests, own_paths_of
from stackgate.envtree.early_digests import MARGIN_NS, EarlyHasher
from tests.helpers.step_runner import run_lines
from tests.helpers.uv_venv import install, site, venv
from tests.helpers.wheels import make_wheel

SOURCES = {
    "pkg/__init__.py": '"""Doc."""\nNAMES = {"alpha", "beta", "gamma"}\n',
    "pkg/sub/__init__.py": "",
    "pkg/sub/mod.py": "def f(x):\n    return x in {'a', 'b', 'c'} or (lambda y: y)(x)\n",
    **{f"pkg/m{n}.py": f"VALUE = {n}\nKEYS = {{'k{n}', 'x'}}\n" for n in range(8)},
}


def _installed(tmp_path: Path, name: str, files: Mapping[str, str | bytes] = SOURCES) -> Path:
    """A real venv with one real wheel installed by uv, every file older than the margin."""
    cache = tmp_path / "uv-cache"
    env = venv(tmp_path / name, cache)
    wheel = make_wheel(tmp_path / f"wheels-{name}", "pkg", "1.0", files=files)
    install(env, cache, wheel)
    time.sleep(2 * MARGIN_NS / 1e9)
    return env.resolve()


def _filled_store(tmp_path: Path, store: Path) -> dict[str, bytes]:
    """The store after a first env's step compiled every source: the `.pyc` bytes by source."""
    env = _installed(tmp_path, "first")
    py = env / "bin" / "python"
    ready = bytecode.prepare(py, os.environ, run_lines, store)
    done = bytecode.compile_site(ready, site(env), 2, run_lines)
    assert done.reused == 0 and done.failed == 0
    tag = sys.implementation.cache_tag
    return {s: bytecode.pyc_path(site(env), s, tag).read_bytes() for s in SOURCES}


def _read_early(env: Path, store: Path) -> tuple[EarlyHasher, EarlyPyc, bytecode.Prepared]:
    ready = bytecode.prepare(env / "bin" / "python", os.environ, run_lines, store)
    assert ready.store is not None
    hasher = EarlyHasher(env, digest_patterns(env, own_paths_of(env)), file_digests)
    early = EarlyPyc(
        site(env), f"{site(env).relative_to(env)}/", ready.tag, ready.store, hasher.shipped_pyc
    )
    hasher.start(early.offer)
    hasher.finish()
    hasher.close()
    return hasher, early, ready


def _step(
    env: Path, hasher: EarlyHasher, early: EarlyPyc, ready: bytecode.Prepared
) -> BytecodeRecord:
    known = known_digests(hasher.results, site(env), f"{site(env).relative_to(env)}/")
    return bytecode.compile_site(ready, site(env), 2, run_lines, placed=early.close(), known=known)


def test_sources_read_early_get_their_stored_pyc_and_the_step_confirms_them(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    expected = _filled_store(tmp_path, store)
    env = _installed(tmp_path, "second")
    hasher, early, ready = _read_early(env, store)

    assert set(early.placed) == set(SOURCES)
    tag = ready.tag
    before = {s: os.lstat(bytecode.pyc_path(site(env), s, tag)) for s in SOURCES}
    assert {st.st_nlink for st in before.values()} == {2}  # linked from the store
    done = _step(env, hasher, early, ready)

    assert (done.reused, done.pyc_files, done.failed) == (len(SOURCES), len(SOURCES), 0)
    for source, body in expected.items():
        target = bytecode.pyc_path(site(env), source, tag)
        assert target.read_bytes() == body  # compileall's bytes, as the step alone makes them
        assert os.lstat(target).st_ino == before[source].st_ino  # confirmed, not put again


def test_a_stale_placement_is_put_or_compiled_again_or_removed(tmp_path: Path) -> None:
    store = tmp_path / "store"
    expected = _filled_store(tmp_path, store)
    env = _installed(tmp_path, "second")
    hasher, early, ready = _read_early(env, store)
    tag, where = ready.tag, site(env)
    # the source replaced after its read (another wheel's copy, the clash step)
    (where / "pkg" / "m1.py").write_text("VALUE = 'replaced'\n")
    # a `.pyc` written in place through its link (uv copying a `.pyc` a wheel ships)
    written = bytecode.pyc_path(where, "pkg/m2.py", tag)
    with written.open("r+b") as handle:
        handle.seek(20)
        handle.write(b"\xff")
    # a source gone after its read
    (where / "pkg" / "m3.py").unlink()

    done = _step(env, hasher, early, ready)

    assert (done.pyc_files, done.failed) == (len(SOURCES) - 1, 0)
    assert done.reused == len(SOURCES) - 3  # m1 and m2 compiled, m3 gone
    assert not bytecode.pyc_path(where, "pkg/m3.py", tag).exists()
    assert bytecode.pyc_path(where, "pkg/m2.py", tag).read_bytes() == expected["pkg/m2.py"]
    shown = subprocess.run(
        [env / "bin" / "python", "-c", "import pkg.m1, pkg.m2; print(pkg.m1.VALUE, pkg.m2.VALUE)"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTHON")},
    )
    assert shown.stdout.split() == ["replaced", "2"]
    # the damaged entry went and the step stored m2's `.pyc` again: the next env takes every
    # source from the store, m2's as compileall makes it
    third = _installed(tmp_path, "third")
    _hasher, early, ready = _read_early(third, store)
    assert set(early.placed) == set(SOURCES)
    assert bytecode.pyc_path(site(third), "pkg/m2.py", tag).read_bytes() == expected["pkg/m2.py"]


def test_a_pyc_a_wheel_ships_is_never_replaced_early(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _filled_store(tmp_path, store)
    tag = sys.implementation.cache_tag
    shipped = f"pkg/__pycache__/m1.{tag}.pyc"
    env = _installed(tmp_path, "second", {**SOURCES, shipped: b"a .pyc the wheel shipped"})
    _hasher, early, _ready = _read_early(env, store)

    assert "pkg/m1.py" not in early.placed and len(early.placed) == len(SOURCES) - 1
    assert (site(env) / shipped).read_bytes() == b"a .pyc the wheel shipped"


def test_a_failing_hook_fails_the_read(tmp_path: Path) -> None:
    env = _installed(tmp_path, "first")

    def hook(rel: str, _st: os.stat_result, _raw: bytes) -> None:
        raise OSError(f"cannot place {rel}")

    hasher = EarlyHasher(env, digest_patterns(env, own_paths_of(env)), file_digests)
    hasher.start(hook)
    with pytest.raises(OSError, match="cannot place"):
        hasher.finish()
    hasher.close()
