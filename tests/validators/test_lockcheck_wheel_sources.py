"""A locked wheel's Python sources before install (lockcheck/wheel_sources.py), from a real
wheel served over real HTTP on 127.0.0.1: the member names and a member's text are read by
byte ranges and cached by the wheel's origin, so a later offline run walks the same tree; a
member the wheel lacks, one too large to walk, and an unreadable wheel give None."""

from __future__ import annotations

import hashlib
from pathlib import Path

from stackgate.installed import Distribution
from stackgate.lock.wheels import LockedWheel
from tests.helpers.range_server import serve
from tests.helpers.wheels import make_wheel
from validators.elf.facts_cache import FactsCache
from validators.lockcheck.wheel_sources import WheelSources
from validators.static.preloaders import MAX_SOURCE_BYTES

DIST = Distribution("pkg", "1.0", Path("/site/pkg-1.0.dist-info"))


def _wheel(root: Path) -> Path:
    return make_wheel(
        root,
        "pkg",
        "1.0",
        files={
            "pkg/__init__.py": "import ctypes\nctypes.CDLL('libpkg.so')\n",
            "pkg/big.py": "#" * (MAX_SOURCE_BYTES + 1),
        },
    )


def _locked(wheel: Path, base: str) -> LockedWheel:
    data = wheel.read_bytes()
    return LockedWheel(
        name="pkg",
        version="1.0",
        url=base + wheel.name,
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        filename=wheel.name,
    )


def test_sources_are_read_by_ranges_then_served_offline_from_the_cache(tmp_path: Path) -> None:
    served = tmp_path / "served"
    wheel = _wheel(served)
    cache = FactsCache(tmp_path / "cache")
    with serve(served) as server:
        locked = _locked(wheel, f"http://127.0.0.1:{server.server_port}/")
        with WheelSources(cache, [locked], offline=False) as sources:
            tree = sources.tree(DIST)
            assert tree is not None
            assert {"pkg/__init__.py", "pkg/big.py"} <= tree.names
            assert "ctypes.CDLL('libpkg.so')" in (tree.text_of("pkg/__init__.py") or "")
            assert tree.text_of("pkg/absent.py") is None
            assert tree.text_of("pkg/big.py") is None  # past MAX_SOURCE_BYTES: not walked
            other = Distribution("other", "1.0", Path("/site/other-1.0.dist-info"))
            assert sources.tree(other) is None  # not in the lock
    # the server is gone: offline, the names and the text read before come from the cache
    with WheelSources(cache, [locked], offline=True) as sources:
        tree = sources.tree(DIST)
        assert tree is not None and "pkg/__init__.py" in tree.names
        assert "libpkg.so" in (tree.text_of("pkg/__init__.py") or "")
        assert tree.text_of("pkg/absent.py") is None  # never fetched, not known offline


def test_offline_and_uncached_or_unreachable_wheels_have_no_tree(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "served")
    cache = FactsCache(tmp_path / "cache")
    locked = _locked(wheel, "http://127.0.0.1:9/")  # nothing listens there
    with WheelSources(cache, [locked], offline=True) as sources:
        assert sources.tree(DIST) is None
    with WheelSources(cache, [locked], offline=False) as sources:
        assert sources.tree(DIST) is None  # FetchError: no tree, nothing cached
