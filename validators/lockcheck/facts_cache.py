"""A content-addressed cache of CachedFacts, keyed by the member's sha256 from RECORD, and of
wheel listings, keyed by the wheel's sha256 from the lock.

Files are gzip'd JSON written to a temporary name and renamed into place, so concurrent runs
never see half a file (two writers of one key write the same content; the last rename wins).
Default root: $STACKGATE_CACHE/lockcheck, else ~/.cache/stackgate/lockcheck.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from validators.lockcheck.facts import FACTS_VERSION, CachedFacts


class WheelListing(BaseModel):
    """What a wheel holds, as far as the check needs: its ELF candidates and their RECORD
    hashes, and its metadata name/version."""

    model_config = ConfigDict(extra="forbid")

    facts_version: int = FACTS_VERSION
    url: str
    sha256: str
    size: int
    objects: dict[str, str | None]  # member name -> RECORD sha256 (hex) or None
    cubins: dict[str, str | None] = {}
    requires: list[str] = []
    name: str = ""  # METADATA Name / Version (the installed group's labels)
    version: str = ""


def default_root() -> Path:
    base = os.environ.get("STACKGATE_CACHE")
    root = Path(base) if base else Path.home() / ".cache" / "stackgate"
    return root / "lockcheck"


class FactsCache:
    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, kind: str, key: str) -> Path:
        return self.root / f"v{FACTS_VERSION}" / kind / key[:2] / f"{key}.json.gz"

    def _load(self, path: Path) -> Any:
        try:
            with gzip.open(path, "rt", encoding="utf-8") as f:
                return json.load(f)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, EOFError):
            return None  # a damaged entry is a miss; it is rewritten

    def _store(self, path: Path, data: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json.gz")
        try:
            with os.fdopen(fd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
                f.write(data.encode("utf-8"))
            Path(tmp).replace(path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def facts(self, sha256: str) -> CachedFacts | None:
        data = self._load(self._path("objects", sha256))
        if data is None:
            return None
        try:
            return CachedFacts.model_validate(data)
        except ValidationError:
            return None

    def put_facts(self, sha256: str, facts: CachedFacts) -> None:
        self._store(self._path("objects", sha256), facts.model_dump_json())

    def listing(self, wheel_sha256: str) -> WheelListing | None:
        data = self._load(self._path("wheels", wheel_sha256))
        if data is None:
            return None
        try:
            return WheelListing.model_validate(data)
        except ValidationError:
            return None

    def put_listing(self, listing: WheelListing) -> None:
        self._store(self._path("wheels", listing.sha256), listing.model_dump_json())

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.root.rglob("*.json.gz"))
