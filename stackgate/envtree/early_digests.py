"""Files hashed while the installer is still writing others: one read of each file, started as
soon as its wheel is installed instead of after the whole install.

uv installs wheels in parallel, each with a `*.dist-info/RECORD` listing its files. A thread watches site-packages for new RECORDs and hashes the
files they list (the tree digest and the sha256 of the bytes as they are, one read:
stackgate.envtree) while uv copies the next wheels. A RECORD can be there before every file it
lists is (the largest cudnn and cusolver libraries come last:
benchmarks/builder/results/build_vs_sync.md), so a file not there yet, or written too recently to
be read now, is tried again every RETRY_S, and a RECORD that changes is read again. A digest
taken early is used later only when the file is provably the one that was read:

- its lstat identity is unchanged (device, inode, size, mtime_ns, ctime_ns: any write, rename
  over it or chmod moves ctime, which no unprivileged call can set back);
- and it was last written at least MARGIN_NS before the read started. A file rewritten after
  the read gets a newer ctime, but the kernel stamps files with a coarse clock that may lag the
  reader's by a tick (<= 10 ms): a file written just before the read could be rewritten within
  the same tick, so such a file is read again.

Anything else (a file no RECORD lists, one written too close to its read, one changed since) is
read by the tree hash as before, so the result is the same bytes' digests whatever the timing.
"""

from __future__ import annotations

import os
import queue
import stat
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from stackgate.envtree.digests import Key, key_of
from stackgate.envtree.wheel_records import STAMP_MARGIN_NS, ParsedRecord, parse_record

MARGIN_NS = STAMP_MARGIN_NS
# stackgate.envtree's one-read digest: (path, size, env-path patterns) -> (tree digest, raw sha256)
Digest = Callable[[str, int, list[bytes]], tuple[bytes, bytes]]
# called from a reader thread with (path relative to the env, its lstat, raw sha256) of each
# file read (the build puts the `.pyc` of a source read early: builder.venv.pyc_early)
OnRead = Callable[[str, os.stat_result, bytes], None]
POLL_S = 0.25
RETRY_S = 1.0  # how often files not there (or too fresh) when tried are tried again


@dataclass(frozen=True)
class Early:
    key: Key
    started_ns: int
    tree: bytes
    raw: bytes

    def valid_for(self, st: os.stat_result) -> bool:
        return (
            key_of(st) == self.key
            and max(st.st_mtime_ns, st.st_ctime_ns) < self.started_ns - MARGIN_NS
        )

    def raw_if_valid(self, path: str) -> bytes | None:
        """The raw sha256 read early, where the file at path is still the one read."""
        try:
            st = os.lstat(path)
        except OSError:
            return None
        return self.raw if self.valid_for(st) else None


def valid_raw(env: Path, early: Mapping[str, Early], skip: Iterable[str]) -> dict[str, bytes]:
    """rel -> raw sha256 of the early digests (outside `skip`) still valid for their files."""
    done = set(skip)
    out: dict[str, bytes] = {}
    for rel, entry in early.items():
        if rel not in done and (raw := entry.raw_if_valid(f"{env}/{rel}")) is not None:
            out[rel] = raw
    return out


class EarlyHasher:
    """Use as a context manager around the install; `finish()` after it returns. Files are read
    by one thread per usable core from one queue (a future per file cost more CPU than the
    reads' bookkeeping on a 58,000-file env)."""

    def __init__(
        self,
        env: Path,
        patterns: list[bytes],
        digest: Digest,
        workers: int | None = None,
    ) -> None:
        self.env = env
        self.patterns = patterns
        self.digest = digest
        self.results: dict[str, Early] = {}
        self.on_read: OnRead | None = None
        # every RECORD row under a `__pycache__` folder (byte-code a wheel ships), added before
        # the RECORD's files are queued
        self.shipped_pyc: set[str] = set()
        # RECORD path -> the identity it was read at: read again when uv rewrites it (a
        # RECORD can be there before the wheel's last files are, and grow)
        self._seen_records: dict[str, tuple[int, int, int, int]] = {}
        self._queued: set[str] = set()
        # listed files not there yet, or written too recently to read: tried again later
        self._later: set[str] = set()
        self._later_lock = threading.Lock()
        # RECORD path -> its rows as last read (the RECORD check and the clash step take them
        # again where the RECORD is unchanged: one parse of every RECORD)
        self._parsed: dict[str, ParsedRecord] = {}
        self._parsed_lock = threading.Lock()
        self._retried = time.monotonic()
        self._todo: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._failed: list[BaseException] = []
        self._stop = threading.Event()
        self._drop = threading.Event()
        count = workers or max(1, len(os.sched_getaffinity(0)))
        self._readers = [
            threading.Thread(target=self._work, name=f"early-digests-{i}", daemon=True)
            for i in range(count)
        ]
        self._poller = threading.Thread(target=self._poll, name="early-digests", daemon=True)

    def __enter__(self) -> EarlyHasher:
        for reader in self._readers:
            reader.start()
        self._poller.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def start(self, on_read: OnRead | None = None) -> EarlyHasher:
        self.on_read = on_read
        return self.__enter__()

    def close(self) -> None:
        """Stop and drop what is queued (idempotent)."""
        self._drop.set()
        self._join()

    def finish(self) -> dict[str, Early]:
        """Stop watching, queue what the last RECORDs list, wait for every read."""
        self._stop.set()
        if self._poller.is_alive():
            self._poller.join()
        self._scan(final=True)
        self._join()
        if self._failed:
            raise self._failed[0]
        return self.results

    def _join(self) -> None:
        self._stop.set()
        if self._poller.is_alive():
            self._poller.join()
        for reader in self._readers:
            if reader.is_alive():
                self._todo.put(None)
        for reader in self._readers:
            if reader.is_alive():
                reader.join()

    def _work(self) -> None:
        while (rel := self._todo.get()) is not None:
            if self._drop.is_set():
                continue
            try:
                self._read(rel)
            except BaseException as exc:  # re-raised by finish(), as a future's result was
                self._failed.append(exc)

    def parsed_records(self) -> dict[str, ParsedRecord]:
        """The RECORDs read so far, by path (safe while the watcher runs)."""
        with self._parsed_lock:
            return dict(self._parsed)

    def _poll(self) -> None:
        while not self._stop.wait(POLL_S):
            self._scan()

    def _scan(self, final: bool = False) -> None:
        now = time.monotonic()
        if final or now - self._retried >= RETRY_S:
            self._retried = now
            with self._later_lock:
                again, self._later = self._later, set()
            for rel in sorted(again):
                self._todo.put(rel)
        for site in sorted(self.env.glob("lib/python*/site-packages")):
            try:
                records = [e.path for e in os.scandir(site) if e.name.endswith(".dist-info")]
            except OSError:
                continue
            for folder in records:
                record = f"{folder}/RECORD"
                try:
                    st = os.stat(record)  # noqa: PTH116 -- str paths: speed
                except OSError:
                    continue
                ident = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
                if not stat.S_ISREG(st.st_mode) or self._seen_records.get(record) == ident:
                    continue
                self._seen_records[record] = ident
                try:
                    parsed = parse_record(self.env, site, Path(record))
                except (OSError, ValueError):
                    continue  # the RECORD check reads it again and names the problem
                with self._parsed_lock:
                    self._parsed[record] = parsed
                self.shipped_pyc.update(rel for rel, _ in parsed.inside if "/__pycache__/" in rel)
                for rel, _claim in parsed.inside:
                    if rel not in self._queued:
                        self._queued.add(rel)
                        self._todo.put(rel)

    def _defer(self, rel: str) -> None:
        if not self._stop.is_set():  # after finish's last scan the tree hash reads it
            with self._later_lock:
                self._later.add(rel)

    def _read(self, rel: str) -> None:
        full = f"{self.env}/{rel}"
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            self._defer(rel)  # listed before uv wrote it
            return
        except OSError:
            return  # the tree hash reads it
        if not stat.S_ISREG(st.st_mode):
            return
        started = time.time_ns()
        if max(st.st_mtime_ns, st.st_ctime_ns) >= started - MARGIN_NS:
            self._defer(rel)  # being written, or too recently for the digest to be used
            return
        try:
            tree, raw = self.digest(full, st.st_size, self.patterns)
        except OSError:
            return
        self.results[rel] = Early(key_of(st), started, tree, raw)
        if self.on_read is not None:
            self.on_read(rel, st, raw)
