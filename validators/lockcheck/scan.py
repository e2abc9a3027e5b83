"""Collect the facts of every ELF object in a lock's wheels: from the cache, else from byte
ranges of the wheels (in parallel), else (offline) listed as lacking."""

from __future__ import annotations

import re
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from stackgate.bounded_http import Budget, Limits
from stackgate.lock.wheel_listing import WheelListing, origin_key
from stackgate.lock.wheels import LockedWheel
from validators.elf.cached_facts import CachedFacts, ReadEvidence
from validators.elf.elf_symbols import ElfReadError
from validators.elf.facts_cache import FactsCache
from validators.elf.fatbin import fatbin_codes_bytes
from validators.lockcheck.http_ranges import FetchError, RemoteFile, make_client
from validators.lockcheck.member_view import IntegrityError, NotKnown
from validators.lockcheck.wheel_reader import RemoteWheel, verify_spooled
from validators.lockcheck.zip_directory import LOCAL_HEADER, ZipFormatError
from validators.static.preloaders import PRELOADER_SOURCES

_CUBIN_NAME = re.compile(r"sm_?(\d{2,3})([af]?)", re.IGNORECASE)


@dataclass
class WheelScan:
    wheel: LockedWheel
    listing: WheelListing | None = None
    facts: dict[str, CachedFacts] = field(default_factory=dict)  # member name -> facts
    cubin_codes: dict[str, str] = field(default_factory=dict)  # member -> label ("" unknown)
    cubins_from_names: int = 0
    lacking: list[str] = field(default_factory=list)  # members (or "(listing)") not in cache
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    integrity: list[str] = field(default_factory=list)  # members that failed RECORD/CRC
    fetch_mode: str = "cache"
    bytes_fetched: int = 0
    requests: int = 0
    retries: int = 0
    wheel_sha256_checked: bool | None = None
    errors: list[str] = field(default_factory=list)  # network / server problems
    malformed: list[str] = field(default_factory=list)  # the wheel is not a readable zip
    # cache entries held back until the wheel's run ends clean (facts_cache's rule)
    pending_listing: WheelListing | None = None
    pending_facts: list[tuple[str, CachedFacts]] = field(default_factory=list)
    # preloaders' source members (torch/__init__.py) -> text, None where the wheel has none
    sources: dict[str, str | None] = field(default_factory=dict)
    pending_sources: list[tuple[str, str | None]] = field(default_factory=list)

    def clean(self) -> bool:
        """Nothing read from this wheel failed: its unproven facts may be cached."""
        return (
            not self.errors
            and not self.malformed
            and not self.integrity
            and self.wheel_sha256_checked is not False
        )


@dataclass
class ScanReport:
    wheels: list[WheelScan]
    seconds: float
    offline: bool
    errors: list[str] = field(default_factory=list)  # network / server problems
    malformed: list[str] = field(default_factory=list)  # wheels that are not readable zips

    @property
    def bytes_fetched(self) -> int:
        return sum(w.bytes_fetched for w in self.wheels)

    @property
    def wheel_bytes(self) -> int:
        return sum(w.wheel.size for w in self.wheels)


# What a crafted wheel can raise while it is read, besides FetchError: a zip that does not
# hold together, deflate data that does not inflate, a member past a limit.
_FORMAT_ERRORS = (ZipFormatError, zlib.error, KeyError)
_Remotes = dict[tuple[str, str], RemoteWheel]  # a scan's open wheels, by LockedWheel.key


def _gate_key(record_sha: str | None, wheel: LockedWheel, name: str) -> str:
    return record_sha or origin_key(wheel.sha256, wheel.url, name)


class Scanner:
    def __init__(
        self,
        cache: FactsCache,
        *,
        offline: bool,
        virtual_site: Path,
        jobs: int = 6,
        client: httpx.Client | None = None,
        progress: Callable[[str], None] | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.cache = cache
        self.limits = limits or Limits()
        self._budget = Budget(self.limits, what="the pre-install verdict")
        # this run's facts by RECORD sha256: proven ones for any wheel (key: sha, None), the
        # others for the wheel they were read from only (key: sha, wheel.key), as the cache
        self._memo: dict[tuple[str, tuple[str, str] | None], CachedFacts] = {}
        self.offline = offline
        self.site = virtual_site
        self.jobs = jobs
        self._client = client
        self._progress = progress or (lambda _m: None)
        self._spool = tempfile.TemporaryDirectory(prefix="stackgate-lockcheck-")
        self._lock = threading.Lock()
        self._keys: dict[str, threading.Lock] = {}
        self._scan_client: httpx.Client | None = None  # the client of the scan in progress
        self._scanning = False

    def close(self) -> None:
        self._spool.cleanup()

    def scan(self, wheels: list[LockedWheel]) -> ScanReport:
        started = time.perf_counter()
        scans = [WheelScan(w) for w in wheels]
        self._budget = Budget(self.limits, what="the pre-install verdict")
        remotes: _Remotes = {}
        self._scan_client = self._client
        self._scanning = True
        try:
            with ThreadPoolExecutor(max_workers=self.jobs) as pool:
                list(pool.map(lambda s: self._listing(s, remotes), scans))
                tasks = [
                    (s, name, sha)
                    for s in scans
                    if s.listing is not None
                    for name, sha in s.listing.objects.items()
                ]

                # the biggest members first, so the long fetches overlap the small ones
                def size_of(task: tuple[WheelScan, str, str | None]) -> int:
                    remote = remotes.get(task[0].wheel.key)
                    member = remote.members.get(task[1]) if remote else None
                    return -(member.compressed_size if member else 0)

                tasks.sort(key=size_of)
                list(pool.map(lambda t: self._object(t[0], t[1], t[2], remotes), tasks))
                nameless = [t for s in scans for t in self._cubins(s)]
                list(pool.map(lambda t: self._cubin(t[0], t[1], t[2], remotes), nameless))
                listed = [s for s in scans if s.listing is not None]
                list(pool.map(lambda s: self._sources(s, remotes), listed))
            for scan in scans:
                remote = remotes.get(scan.wheel.key)
                if remote is not None:
                    scan.fetch_mode = remote.remote.mode
                    if remote.remote.mode != "ranges":
                        scan.wheel_sha256_checked = verify_spooled(remote.remote, scan.wheel.sha256)
                        if scan.wheel_sha256_checked is False:
                            scan.integrity.append(
                                f"{scan.wheel.filename}: sha256 does not match the lock"
                            )
                    scan.bytes_fetched = remote.remote.stats.bytes_fetched
                    scan.requests = remote.remote.stats.requests
                    scan.retries = remote.remote.stats.retries
                    remote.remote.close()
                self._flush(scan)
        finally:
            client, self._scan_client, self._scanning = self._scan_client, None, False
            if client is not None and self._client is None:
                client.close()
        return ScanReport(
            scans,
            time.perf_counter() - started,
            self.offline,
            [e for s in scans for e in s.errors],
            [e for s in scans for e in s.malformed],
        )

    def _flush(self, scan: WheelScan) -> None:
        """Write what this wheel's run held back, if the run ended clean."""
        if not scan.clean():
            return
        if scan.pending_listing is not None:
            self.cache.put_listing(scan.pending_listing, proven=scan.wheel_sha256_checked is True)
        for key, facts in scan.pending_facts:
            self.cache.put_facts(key, facts)
        for key, text in scan.pending_sources:
            self.cache.put_source(key, text)

    def _sources(self, scan: WheelScan, remotes: _Remotes) -> None:
        """The preloaders' source files the wheel ships (torch/__init__.py, whose preload
        list is a fact of the verdict: preloaders.py), from the cache or the wheel; offline
        and uncached, listed as lacking."""
        assert scan.listing is not None
        for member in PRELOADER_SOURCES:
            top = member.split("/", 1)[0] + "/"
            if not any(name.startswith(top) for name in scan.listing.objects):
                continue
            key = origin_key(scan.wheel.sha256, scan.wheel.url, member)
            known, text = self.cache.source(key)
            if not known:
                remote = self._remote_for(scan, remotes)
                if remote is None:
                    with self._lock:
                        scan.lacking.append(member)
                    continue
                try:
                    if not remote.members:
                        remote.read_directory()
                    text = (
                        remote.read_small(member).decode("utf-8", "replace")
                        if member in remote.members
                        else None
                    )
                except FetchError as exc:
                    self._failed(scan, str(exc))
                    continue
                except (*_FORMAT_ERRORS, IntegrityError) as exc:
                    self._failed(scan, f"not a readable wheel: {exc}", malformed=True)
                    continue
                with self._lock:
                    scan.pending_sources.append((key, text))
            scan.sources[member] = text

    def _keep(self, scan: WheelScan, name: str, record_sha: str | None, facts: CachedFacts) -> None:
        """Cache facts just read: by content when the member's bytes were proven to be its
        RECORD hash, else (held back) by where they came from."""
        read = facts.read
        proven = bool(record_sha and read is not None and read.whole and read.sha256_checked)
        with self._lock:
            if record_sha:
                self._memo[(record_sha, None if proven else scan.wheel.key)] = facts
            if record_sha and proven:
                self.cache.put_facts(record_sha, facts)
            else:
                scan.pending_facts.append(
                    (origin_key(scan.wheel.sha256, scan.wheel.url, name), facts)
                )

    def _cached(self, scan: WheelScan, name: str, record_sha: str | None) -> CachedFacts | None:
        if record_sha:
            with self._lock:
                memo = self._memo.get((record_sha, None))
                mine = self._memo.get((record_sha, scan.wheel.key))
            if memo is not None:
                return memo
            if mine is not None:
                # a second member of this wheel with the same RECORD hash (lib/x.so.0 and
                # lib/x.so.0.6.0): cached under its own origin too, or the next run reads it
                with self._lock:
                    scan.pending_facts.append(
                        (origin_key(scan.wheel.sha256, scan.wheel.url, name), mine)
                    )
                return mine
            proven = self.cache.facts(record_sha)
            if proven is not None:
                return proven
        return self.cache.facts(origin_key(scan.wheel.sha256, scan.wheel.url, name))

    def _failed(self, scan: WheelScan, text: str, *, malformed: bool = False) -> None:
        """Note why this wheel could not be read: a network or server problem, or (malformed)
        a wheel that does not hold together or breaks a limit."""
        line = f"{scan.wheel.filename}: {text}"
        with self._lock:
            (scan.malformed if malformed else scan.errors).append(line)

    def _remote(self, scan: WheelScan, client: httpx.Client, remotes: _Remotes) -> RemoteWheel:
        with self._lock:
            remote = remotes.get(scan.wheel.key)
            if remote is None:
                file = RemoteFile(
                    client, scan.wheel.url, scan.wheel.size, Path(self._spool.name), self._budget
                )
                remote = remotes[scan.wheel.key] = RemoteWheel(file, scan.wheel.sha256)
            return remote

    def _client_now(self) -> httpx.Client | None:
        """The scan's client, made on the first read: a scan that the cache answers whole
        (a warm `validators compat` pair) makes none (an SSL context costs CPU)."""
        if self.offline or not self._scanning:
            return None
        with self._lock:
            if self._scan_client is None:
                self._scan_client = make_client(self.limits)
            return self._scan_client

    def _remote_for(self, scan: WheelScan, remotes: _Remotes) -> RemoteWheel | None:
        """The wheel's remote, opened now where its listing came from the cache but a member's
        facts did not (an earlier run stopped part-way): online, a cached listing is no reason
        to call the member lacking."""
        remote = remotes.get(scan.wheel.key)
        client = self._client_now() if remote is None else None
        if client is not None:
            remote = self._remote(scan, client, remotes)
        return remote

    def _listing(self, scan: WheelScan, remotes: _Remotes) -> None:
        cached = self.cache.listing(scan.wheel.sha256, scan.wheel.url)
        if cached is not None:
            scan.listing = cached
            return None
        client = self._client_now()
        if client is None:
            scan.lacking.append("(wheel listing)")
            return None
        remote = self._remote(scan, client, remotes)
        try:
            remote.read_directory()
            scan.listing = remote.listing(scan.wheel.url)
        except FetchError as exc:
            return self._failed(scan, str(exc))
        except (*_FORMAT_ERRORS, IntegrityError) as exc:
            return self._failed(scan, f"not a readable wheel: {exc}", malformed=True)
        scan.pending_listing = scan.listing
        self._progress(f"listed {scan.wheel.filename}: {len(scan.listing.objects)} ELF candidates")
        return None

    def _object(
        self, scan: WheelScan, name: str, record_sha: str | None, remotes: _Remotes
    ) -> None:
        """One member's facts; members with the same content (cupti ships in two wheels, and
        three times in triton's) are read once, the others wait for it and use the cache."""
        key = _gate_key(record_sha, scan.wheel, name)
        with self._lock:
            gate = self._keys.setdefault(key, threading.Lock())
        with gate:
            try:
                return self._object_once(scan, name, record_sha, remotes)
            except _FORMAT_ERRORS as exc:
                return self._failed(scan, f"{name}: not readable: {exc}", malformed=True)

    def _object_once(
        self, scan: WheelScan, name: str, record_sha: str | None, remotes: _Remotes
    ) -> None:
        cached = self._cached(scan, name, record_sha)
        if cached is not None:
            with self._lock:
                scan.facts[name] = cached
            return None
        remote = self._remote_for(scan, remotes)
        if self.offline or self._client_missing(remote):
            with self._lock:
                scan.lacking.append(name)
            return None
        assert remote is not None
        if not remote.members:
            try:
                remote.read_directory()
            except FetchError as exc:
                return self._failed(scan, str(exc))
        try:
            facts = remote.object_facts(name, record_sha, self.site / name)
        except IntegrityError as exc:
            with self._lock:
                scan.integrity.append(str(exc))
            return None
        except ElfReadError as exc:
            cause = exc.__context__
            if isinstance(cause, FetchError):
                return self._failed(scan, str(cause))
            if isinstance(cause, _FORMAT_ERRORS):
                return self._failed(scan, f"{name}: not readable: {cause}", malformed=True)
            if isinstance(cause, IntegrityError):
                with self._lock:
                    scan.integrity.append(str(cause))
                return None
            with self._lock:
                scan.unreadable.append((name, exc.reason))
            return None
        except FetchError as exc:
            return self._failed(scan, str(exc))
        except NotKnown as exc:  # pragma: no cover - the fetching stream always fetches
            return self._failed(scan, str(exc))
        self._keep(scan, name, record_sha, facts)
        with self._lock:
            scan.facts[name] = facts
        self._progress(f"read {name} ({facts.read.compressed_read if facts.read else 0} bytes)")
        return None

    @staticmethod
    def _client_missing(remote: RemoteWheel | None) -> bool:
        return remote is None

    def _cubins(self, scan: WheelScan) -> list[tuple[WheelScan, str, str | None]]:
        """A cubin's target from its file name where the name says it (as the installed group
        reads the suffix); the others are returned, to be read (`_cubin`)."""
        if scan.listing is None:
            return []
        rest: list[tuple[WheelScan, str, str | None]] = []
        for name, record_sha in scan.listing.cubins.items():
            match = _CUBIN_NAME.search(name.rsplit("/", 1)[-1])
            if match:
                scan.cubin_codes[name] = f"sm_{int(match.group(1))}{match.group(2).lower()}"
                scan.cubins_from_names += 1
            else:
                rest.append((scan, name, record_sha))
        return rest

    def _cubin(self, scan: WheelScan, name: str, record_sha: str | None, remotes: _Remotes) -> None:
        """A cubin whose name does not say its target: read as the installed group reads it
        (e_flags, and the a/f suffix from `.note.nv.tkinfo`), cached."""
        cached = self._cached(scan, name, record_sha)
        remote = self._remote_for(scan, remotes) if cached is None else None
        if cached is None and remote is not None and not self.offline:
            try:
                if not remote.members:
                    remote.read_directory()
                cached = _cubin_facts(remote, name, record_sha)
            except FetchError as exc:
                return self._failed(scan, f"{name}: {exc}")
            except _FORMAT_ERRORS as exc:
                return self._failed(scan, f"{name}: not readable: {exc}", malformed=True)
            except IntegrityError as exc:
                with self._lock:
                    scan.integrity.append(str(exc))
                return None
            self._keep(scan, name, record_sha, cached)
        with self._lock:
            if cached is None:
                scan.lacking.append(name)
            else:
                scan.cubin_codes[name] = cached.gpu_codes[0] if cached.gpu_codes else ""
        return None


CUBIN_WHOLE_BELOW = 4 << 20  # compressed bytes; larger nameless cubins: header only


def _cubin_facts(remote: RemoteWheel, name: str, record_sha: str | None) -> CachedFacts:
    member = remote.members[name]
    if member.compressed_size <= CUBIN_WHOLE_BELOW:
        view = remote.view(member, record_sha)
        view.ensure(0, member.size)
        data = view.get(0, member.size)
        try:
            codes = fatbin_codes_bytes(data, Path(name))
        except ElfReadError:
            codes = []
        return CachedFacts(
            gpu_codes=[c.label() for c in codes],
            read=ReadEvidence(
                member=name,
                member_size=member.size,
                compressed_size=member.compressed_size,
                compressed_read=view.log.compressed_read,
                whole=view.log.whole,
                sha256_checked=view.log.sha256_checked,
                record_mismatch=view.log.record_mismatch,
                prefix_bytes=member.size,
                gpu_code="complete",
            ),
        )
    return _cubin_head(remote, name)


def _cubin_head(remote: RemoteWheel, name: str) -> CachedFacts:
    member = remote.members[name]
    start = member.local_offset
    raw = remote.remote.read(start, start + LOCAL_HEADER + len(name.encode()) + 1024)
    nlen = int.from_bytes(raw[26:28], "little")
    elen = int.from_bytes(raw[28:30], "little")
    data = raw[LOCAL_HEADER + nlen + elen :]
    if len(data) < min(member.compressed_size, 512):
        more = remote.remote.read(start + len(raw), start + LOCAL_HEADER + nlen + elen + 1024)
        data += more
    head = data[:64] if member.method == 0 else zlib.decompressobj(wbits=-15).decompress(data, 64)
    from validators.lockcheck.member_facts import cubin_label

    label = cubin_label(head, name)
    return CachedFacts(
        gpu_codes=[label] if label else [],
        read=ReadEvidence(
            member=name,
            member_size=member.size,
            compressed_size=member.compressed_size,
            compressed_read=len(raw),
            whole=False,
            sha256_checked=False,
            prefix_bytes=len(head),
            gpu_code="from-header",
        ),
    )
