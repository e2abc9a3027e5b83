"""`.pyc` put in place while uv still installs: each `.py` the early reader hashed
(stackgate.envtree.early_digests) gets its stored `.pyc` (builder.venv.pyc_store) at once, on the
cores uv's copy leaves idle, and the byte-code step after the install only confirms it
(builder.venv.bytecode.compile_site's `placed`).

A placement counts only while the source's final sha256 is the one it was chosen for and the
`.pyc` is still the file put there; the step puts or compiles anything else as if never placed
(a source another wheel or the clash step replaced after its read, a `.pyc` path uv wrote later).
A `.pyc` a wheel ships is never replaced here: its RECORD lists it, and such sources are left to
the step (uv's copy writes into an existing file, so a link there would take the wheel's bytes).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass, field
from pathlib import Path

from builder.venv.bytecode import pyc_path
from builder.venv.pyc_store import PycStore
from stackgate.envtree.digests import Key, key_of
from stackgate.envtree.early_digests import Early

_PYCACHE = "/__pycache__/"


@dataclass
class EarlyPyc:
    """site: the env's site-packages; site_rel: the same relative to the env, ending in `/`."""

    site: Path
    site_rel: str
    tag: str
    store: PycStore
    # the RECORD rows under a `__pycache__` folder seen so far (relative to the env; the early
    # reader's `shipped_pyc`, filled before the files of each RECORD are queued)
    shipped: Set[str]
    placed: dict[str, tuple[str, Key]] = field(default_factory=dict)
    _closed: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def offer(self, rel: str, _st: os.stat_result, raw: bytes) -> None:
        """An early reader's hook: rel (relative to the env) was read with sha256 raw."""
        if not rel.startswith(self.site_rel) or not rel.endswith(".py") or _PYCACHE in rel:
            return
        with self._lock:
            if not self._closed:
                self._place(rel[len(self.site_rel) :], raw)

    def close(self) -> dict[str, tuple[str, Key]]:
        """No placement after this returns (one under way is finished first): what was placed."""
        with self._lock:
            self._closed = True
            return dict(self.placed)

    def _place(self, source: str, raw: bytes) -> None:
        target = pyc_path(self.site, source, self.tag)
        if os.path.lexists(target) or f"{self.site_rel}{target.relative_to(self.site)}" in self.shipped:
            return
        digest = raw.hex()
        try:
            target.parent.mkdir(exist_ok=True)
            if self.store.put(digest, source, target):
                self.placed[source] = (digest, key_of(target.lstat()))
        except OSError:
            return  # the byte-code step puts or compiles it


def known_digests(
    results: Mapping[str, Early], site: Path, site_rel: str
) -> Callable[[str], str | None]:
    """source (relative to site) -> its sha256 as the early reader read it, where the file is
    provably unchanged since (early_digests.Early.valid_for); None otherwise."""

    def known(source: str) -> str | None:
        entry = results.get(f"{site_rel}{source}")
        raw = entry.raw_if_valid(f"{site}/{source}") if entry is not None else None
        return raw.hex() if raw is not None else None

    return known
