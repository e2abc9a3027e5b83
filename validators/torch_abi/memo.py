"""A FactsCache that keeps what it read in memory for the length of one matrix: torch's
closure is the same for every package version judged beside it, so neither its decoded facts
nor the static group's objects made from them (by facts and path) are rebuilt for each pair."""

from __future__ import annotations

import threading
from pathlib import Path

from stackgate.lock.wheel_listing import WheelListing
from validators.elf.cached_facts import CachedFacts
from validators.elf.facts_cache import FactsCache
from validators.elf.object_facts import ObjectFacts


class MemoCache(FactsCache):
    def __init__(self, inner: FactsCache) -> None:
        super().__init__(inner.root)
        self._facts: dict[str, CachedFacts] = {}
        self._listings: dict[tuple[str, str], WheelListing] = {}
        self._objects: dict[tuple[int, Path], tuple[CachedFacts, ObjectFacts]] = {}
        self._lock = threading.Lock()

    def facts(self, sha256: str) -> CachedFacts | None:
        with self._lock:
            hit = self._facts.get(sha256)
        if hit is None:
            hit = super().facts(sha256)
            if hit is not None:
                with self._lock:
                    self._facts[sha256] = hit
        return hit

    def put_facts(self, sha256: str, facts: CachedFacts) -> None:
        super().put_facts(sha256, facts)
        with self._lock:
            self._facts[sha256] = facts

    def listing(self, wheel_sha256: str, url: str) -> WheelListing | None:
        with self._lock:
            hit = self._listings.get((wheel_sha256, url))
        if hit is None:
            hit = super().listing(wheel_sha256, url)
            if hit is not None:
                with self._lock:
                    self._listings[(wheel_sha256, url)] = hit
        return hit

    def put_listing(self, listing: WheelListing, *, proven: bool) -> None:
        super().put_listing(listing, proven=proven)
        with self._lock:
            self._listings[(listing.sha256, listing.url)] = listing

    def object_facts(self, cached: CachedFacts, path: Path) -> ObjectFacts:
        key = (id(cached), path)
        with self._lock:
            hit = self._objects.get(key)
        if hit is not None and hit[0] is cached:  # the facts object is kept: its id is its own
            return hit[1]
        made = cached.object_facts(path)
        with self._lock:
            self._objects[key] = (cached, made)
        return made
