"""The static check's facts cache is written and read relative to folders opened from its
root without following a symlink: a racer swapping a cache folder for a link to a victim
folder never gets a file written there, and an entry planted as a link is a miss."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from tests.helpers.swap import racing
from validators.elf.file_facts_cache import CACHE_VERSION, FileFactsCache

TRIES = 400


def test_cache_writes_never_land_in_a_folder_swapped_for_a_symlink(tmp_path: Path) -> None:
    cache = FileFactsCache(tmp_path / "cache")
    victim = tmp_path / "victim"
    victim.mkdir()
    cache.put("elf", "k0", {"x": 0})
    kind_dir = tmp_path / "cache" / f"v{CACHE_VERSION}" / "elf"
    assert kind_dir.is_dir()
    with racing(kind_dir, victim) as racer:
        for i in range(TRIES):
            cache.put("elf", f"k{i}", {"x": i})  # a refused write is only a miss later
    assert racer.swaps > 0
    assert list(victim.rglob("*")) == []
    cache.put("elf", "after", {"x": 1})  # control: the cache still works
    assert cache.get("elf", "after") == {"x": 1}


def test_an_entry_planted_as_a_symlink_is_a_miss(tmp_path: Path) -> None:
    cache = FileFactsCache(tmp_path / "cache")
    cache.put("elf", "real", {"ok": True})
    planted = tmp_path / "planted.json"
    planted.write_text('{"planted": true}')
    digest = hashlib.sha256(b"elf\0fake").hexdigest()
    entry = tmp_path / "cache" / f"v{CACHE_VERSION}" / "elf" / digest[:2] / f"{digest}.json"
    entry.parent.mkdir(parents=True, exist_ok=True)
    entry.symlink_to(planted)
    assert cache.get("elf", "fake") is None and not cache.has("elf", "fake")
    # a folder of the cache made a link to a folder of planted entries: also a miss
    real_digest = hashlib.sha256(b"elf\0real").hexdigest()
    folder = tmp_path / "cache" / f"v{CACHE_VERSION}" / "elf" / real_digest[:2]
    assert cache.get("elf", "real") == {"ok": True}  # control
    os.rename(folder, tmp_path / "moved")
    folder.symlink_to(tmp_path / "moved")
    assert cache.get("elf", "real") is None
