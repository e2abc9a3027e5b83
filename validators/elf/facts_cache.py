"""A cache of CachedFacts and wheel listings, each under a key its bytes have earned (a lock
naming the real torch wheel's sha256 at another URL must not teach the cache what "torch" holds):

- proven by content: facts of a member read whole whose sha256 matched its RECORD hash, or a
  listing of a wheel streamed whole whose sha256 matched the lock, are keyed by that sha256 and
  serve any lock naming those bytes;
- not proven (a member read in part, a wheel read by ranges): keyed by `origin_key` (the
  wheel's sha256 *and URL*, and the member's name), serving only a lock naming the same place.

Nothing of a wheel is written before its run ends without an integrity or network error for it.
Files are gzip'd JSON renamed into place, so concurrent runs never see half a file (writers of
one key write the same content). Default root: lockcheck/ under stackgate's cache root
(stackgate/settings.py).
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from stackgate.lock.torch_abi import facts_root
from stackgate.lock.wheel_listing import ListingStore, WheelListing, origin_key

if TYPE_CHECKING:  # numpy and pyelftools: only where facts are read (the listing
    # path of `validators compat --lock` imports neither)
    from validators.elf.cached_facts import CachedFacts
    from validators.elf.object_facts import ObjectFacts


# gzip level 1: torch's export tables are tens of MB of JSON; level 9 (gzip's default) takes
# most of a cold `validators compat` matrix's CPU, and level 1 writes several times faster for
# files somewhat larger (benchmarks/compat/README.md)
_LEVEL = 1


def default_root() -> Path:
    return facts_root()


class FactsCache(ListingStore):
    def store_text(self, path: Path, data: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json.gz")
        try:
            with (
                os.fdopen(fd, "wb") as raw,
                gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=_LEVEL) as f,
            ):
                f.write(data.encode("utf-8"))
            Path(tmp).replace(path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def facts(self, sha256: str) -> CachedFacts | None:
        data = self._load(self.path("objects", sha256))
        if data is None:
            return None
        from validators.elf.cached_facts import CachedFacts

        try:
            return CachedFacts.model_validate(data)
        except ValidationError:
            return None

    def put_facts(self, sha256: str, facts: CachedFacts) -> None:
        self.store_text(self.path("objects", sha256), facts.model_dump_json())

    def source(self, key: str) -> tuple[bool, str | None]:
        """(known, text) of a wheel's source member read before (preloaders.py's lists);
        text None: the wheel has no such member."""
        data = self._load(self.path("sources", key))
        if not isinstance(data, dict) or "text" not in data:
            return False, None
        text = data["text"]
        return True, text if isinstance(text, str) else None

    def put_source(self, key: str, text: str | None) -> None:
        self.store_text(self.path("sources", key), json.dumps({"text": text}))

    def put_listing(self, listing: WheelListing, *, proven: bool) -> None:
        """`proven`: the whole wheel was read and matched the lock's sha256."""
        key = listing.sha256 if proven else origin_key(listing.sha256, listing.url)
        self.store_text(self.path("wheels", key), listing.model_dump_json())

    def object_facts(self, cached: CachedFacts, path: Path) -> ObjectFacts:
        """The static group's facts of `cached` installed at `path` (a memoizing cache keeps
        them: `validators compat` places torch's closure at the same paths for every pair)."""
        return cached.object_facts(path)

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.root.rglob("*.json.gz"))
