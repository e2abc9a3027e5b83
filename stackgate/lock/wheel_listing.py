"""The read side of the pre-install reader's cache that the builder needs too: a
wheel's listing (which members are ELF objects or cubins) and where entries live. `builder
lock` reads listings to find a lock's binary wheels, and with them the verdict kept for those
wheels (stackgate.lock.torch_abi.read_by_binaries), in its own process. The validators' FactsCache
(validators/elf/facts_cache.py) builds on this class: it writes entries and reads facts.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

FACTS_VERSION = 5  # 2: listings carry METADATA Name/Version; 3: nameless cubins read whole;
# 4: unproven facts keyed by origin (entries of 3 were keyed by unproven claims: not reused);
# 5: fatbins looked for in every allocated data section (cuFFT's .data)


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


def origin_key(wheel_sha256: str, url: str, member: str = "") -> str:
    """The key of what was read from the file at `url` (claimed to be `wheel_sha256`)."""
    return hashlib.sha256(f"origin\0{wheel_sha256}\0{url}\0{member}".encode()).hexdigest()


class ListingStore:
    """Entries under `root` (gzip'd JSON); reading listings only."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, kind: str, key: str) -> Path:
        """Where the entry `key` of `kind` (objects, wheels) lives, whether or not it exists."""
        return self.root / f"v{FACTS_VERSION}" / kind / key[:2] / f"{key}.json.gz"

    def _load(self, path: Path) -> Any:
        text = self.load_text(path)
        if text is None:
            return None
        try:
            return json.loads(text)
        except ValueError:
            return None  # a damaged entry is a miss; it is rewritten

    def load_text(self, path: Path) -> str | None:
        """An entry's text; None when absent or damaged."""
        try:
            with gzip.open(path, "rt", encoding="utf-8") as f:
                return f.read()
        except (OSError, EOFError, UnicodeDecodeError):
            return None

    def listing(self, wheel_sha256: str, url: str) -> WheelListing | None:
        """The wheel's listing: proven by its sha256, else read from this URL before."""
        for key in (wheel_sha256, origin_key(wheel_sha256, url)):
            data = self._load(self.path("wheels", key))
            if data is None:
                continue
            try:
                listing = WheelListing.model_validate(data)
            except ValidationError:
                continue
            if listing.sha256 == wheel_sha256:
                return listing
        return None
