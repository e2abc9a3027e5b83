"""The pre-install verdict's memo (issue 25 item 2): a lock whose facts all come from the cache
gets the results of the last such run; a run that fetched is never replayed; another lock,
other targets, or a facts entry that went away make it run again. Real wheels (gcc-built
ELF objects) over real HTTP on 127.0.0.1, a real facts cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stackgate.lock.wheels import read_lock
from tests.helpers.range_server import serve
from tests.validators import elf_env
from tests.validators.test_lockcheck import Built, built, by_check, write_lock
from validators.core.results import Result
from validators.elf.facts_cache import FactsCache
from validators.lockcheck.check import LockInputs, run_lock_check

pytestmark = pytest.mark.skipif(not elf_env.have_compilers(), reason="needs gcc and g++")
__all__ = ["built"]  # the module-scoped fixture of test_lockcheck, shared


def _check(
    lock: Path, cache: Path, *, offline: bool = False, targets: tuple[str, ...] = ()
) -> list[Result]:
    results, _ = run_lock_check(
        LockInputs(
            lock=lock,
            wheels=read_lock(lock),
            cache=FactsCache(cache),
            offline=offline,
            jobs=3,
            targets=targets,
            memo=True,
        )
    )
    return results


def _lock(built: Built, folder: Path, base: str, torch: str) -> Path:
    """A lock of `torch` (a key of built.wheels) and the sgl-kernel built against 2.9.1."""
    wheels = [built.wheels[torch], built.wheels["sgl-kernel"]]
    return write_lock(folder / "uv.lock", base, wheels)


def _memo(results: list[Result]) -> Any:
    return by_check(results)["static.abi.summary"].evidence.get("resolution_memo")


def _comparable(results: list[Result]) -> dict[str, tuple[str, str]]:
    out = {}
    for r in results:
        ev = {k: v for k, v in r.evidence.items() if k not in ("resolution_memo", "seconds")}
        out[r.check] = (r.status, r.reason + repr(sorted(ev.items(), key=str)))
    return out


def test_an_all_cached_lock_is_replayed_and_a_fetching_run_never(
    built: Built, tmp_path: Path
) -> None:
    with serve(built.root) as server:
        base = f"http://127.0.0.1:{server.server_port}/"
        lock = _lock(built, tmp_path / "l", base, "torch-2.10.0")
        cache = tmp_path / "cache"
        fetched = _check(lock, cache)
        assert "fetched 0.0 MB" not in by_check(fetched)["static.lock.fetch"].reason
        assert not (cache / "memo").exists()  # a run that fetched is not kept
        stored = _check(lock, cache)
        hit = _check(lock, cache)
    assert (_memo(fetched), _memo(stored), _memo(hit)) == ("off", "stored", "hit")
    assert by_check(hit)["static.abi.sgl_kernel"].status == "FAIL"
    assert _comparable(hit) == _comparable(stored)
    assert "fetched 0.0 MB" in by_check(hit)["static.lock.fetch"].reason


def test_other_inputs_or_a_lost_facts_entry_run_again(built: Built, tmp_path: Path) -> None:
    with serve(built.root) as server:
        base = f"http://127.0.0.1:{server.server_port}/"
        broken = _lock(built, tmp_path / "a", base, "torch-2.10.0")
        fine = _lock(built, tmp_path / "b", base, "torch-2.9.1")
        cache = tmp_path / "cache"
        for lock in (broken, fine):
            _check(lock, cache)  # fetch
            _check(lock, cache)  # all cached: kept
        assert _memo(_check(broken, cache)) == "hit"
        again = _check(fine, cache)
        assert _memo(again) == "hit"
        assert by_check(again)["static.abi.sgl_kernel"].status == "PASS"
        # other targets, or offline (the fetch result says so): not the kept verdict
        assert _memo(_check(broken, cache, targets=("9.0",))) != "hit"
        assert _memo(_check(broken, cache, offline=True)) != "hit"
    # a facts entry gone from the cache: the offline run lacks it, never replays
    for entry in FactsCache(cache).path("objects", "x").parent.parent.rglob("*.json.gz"):
        entry.unlink()
    lost = by_check(_check(broken, cache, offline=True))
    assert lost["static.lock.fetch"].status == "ERROR"
    assert "static.abi.summary" not in lost
