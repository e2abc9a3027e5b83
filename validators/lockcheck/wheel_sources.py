"""A locked wheel's Python sources before install, for the import-time walk of a package whose
modules cannot load (verdict.walk_imports): the wheel's member names from its central
directory, each source member read by byte ranges when the walk asks for it.

Both are cached by the wheel's origin (facts_cache's rule for bytes not proven by content), so
a later offline run walks the same files; offline and uncached, a wheel has no tree (the
verdict then says the impact is not known).
"""

from __future__ import annotations

import json
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import httpx
from packaging.utils import canonicalize_name

from stackgate.bounded_http import Budget, Limits
from stackgate.installed import Distribution
from stackgate.lock.wheel_listing import origin_key
from stackgate.lock.wheels import LockedWheel
from validators.elf.facts_cache import FactsCache
from validators.lockcheck.http_ranges import FetchError, RemoteFile, make_client
from validators.lockcheck.member_view import IntegrityError
from validators.lockcheck.wheel_reader import RemoteWheel
from validators.lockcheck.zip_directory import ZipFormatError
from validators.static.imports import SourceTree
from validators.static.preloaders import MAX_SOURCE_BYTES

NAMES = "(member names)"


class WheelSources:
    """Source trees of a lock's wheels, opened on demand (use as a context manager)."""

    def __init__(
        self,
        cache: FactsCache,
        wheels: list[LockedWheel],
        *,
        offline: bool,
        limits: Limits | None = None,
    ) -> None:
        self.cache = cache
        self.wheels = {canonicalize_name(w.name): w for w in wheels}
        self.offline = offline
        self.limits = limits or Limits()
        self._client: httpx.Client | None = None
        self._remotes: dict[str, RemoteWheel] = {}
        self._spool = tempfile.TemporaryDirectory(prefix="stackgate-sources-")
        self._lock = threading.Lock()

    def __enter__(self) -> WheelSources:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for remote in self._remotes.values():
            remote.remote.close()
        if self._client is not None:
            self._client.close()
        self._spool.cleanup()

    def _remote(self, wheel: LockedWheel) -> RemoteWheel | None:
        if self.offline:
            return None
        with self._lock:
            remote = self._remotes.get(wheel.url)
            if remote is None:
                if self._client is None:
                    self._client = make_client(self.limits)
                budget = Budget(self.limits, what="reading a wheel's sources")
                file = RemoteFile(
                    self._client, wheel.url, wheel.size, Path(self._spool.name), budget
                )
                remote = self._remotes[wheel.url] = RemoteWheel(file, wheel.sha256)
            return remote

    def _entry(self, wheel: LockedWheel, member: str) -> tuple[bool, str | None]:
        return self.cache.source(origin_key(wheel.sha256, wheel.url, member))

    def tree(self, dist: Distribution) -> SourceTree | None:
        wheel = self.wheels.get(canonicalize_name(dist.name))
        if wheel is None:
            return None
        known, text = self._entry(wheel, NAMES)
        if not known or text is None:
            text = self._fetch(wheel, NAMES, lambda remote: json.dumps(sorted(remote.members)))
            if text is None:
                return None
        names = frozenset(str(n) for n in json.loads(text))
        return SourceTree(names, lambda member: self._text(wheel, member))

    def _text(self, wheel: LockedWheel, member: str) -> str | None:
        known, text = self._entry(wheel, member)
        if known:
            return text
        return self._fetch(wheel, member, lambda remote: _member_text(remote, member))

    def _fetch(
        self, wheel: LockedWheel, member: str, read: Callable[[RemoteWheel], str | None]
    ) -> str | None:
        """`read` over the wheel's central directory (fetched first), its text kept in the
        cache under `member`; None offline, when the wheel cannot be read or `read` finds
        nothing."""
        remote = self._remote(wheel)
        if remote is None:
            return None
        try:
            if not remote.members:
                remote.read_directory()
            text = read(remote)
        except (FetchError, ZipFormatError, IntegrityError):
            return None
        if text is not None:
            self.cache.put_source(origin_key(wheel.sha256, wheel.url, member), text)
        return text


def _member_text(remote: RemoteWheel, member: str) -> str | None:
    """A source member's text, read by byte ranges; None when absent or too large to walk."""
    found = remote.members.get(member)
    if found is None or found.size > MAX_SOURCE_BYTES:
        return None
    view = remote.view(found, None)
    view.ensure(0, found.size)
    return view.get(0, found.size).decode("utf-8", "replace")
