"""Byte ranges of a remote file over HTTP, counted.

Every read asks for an exact range (`Range: bytes=a-b`) and consumes the whole answer, so the
byte count is what crossed the wire into this process. A server that answers a range request
with 200 and the whole body does not support ranges: the file is then streamed once into a
temporary spool file and every later read is served from it (said in `RemoteFile.mode`).
A connection dropped mid-read is retried from where it stopped, a few times.
"""

from __future__ import annotations

import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx

RETRIES = 3
CHUNK = 1 << 16


class FetchError(Exception):
    """The file could not be read (network, server error, short answer)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{url}: {reason}")
        self.url = url
        self.reason = reason


@dataclass
class FetchStats:
    bytes_fetched: int = 0
    requests: int = 0
    retries: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, nbytes: int, requests: int = 0, retries: int = 0) -> None:
        with self._lock:
            self.bytes_fetched += nbytes
            self.requests += requests
            self.retries += retries


class RemoteFile:
    """One remote file of known size; thread-safe reads of [start, end)."""

    def __init__(self, client: httpx.Client, url: str, size: int, spool_dir: Path) -> None:
        self.client = client
        self.url = url
        self.size = size
        self.mode = "ranges"  # or "streamed (server ignores Range)"
        self.stats = FetchStats()
        self._spool_dir = spool_dir
        self._spool: IO[bytes] | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        if self._spool is not None:
            self._spool.close()
            self._spool = None

    def read(self, start: int, end: int) -> bytes:
        start, end = max(0, start), min(end, self.size)
        if end <= start:
            return b""
        with self._lock:
            spool = self._spool
        if spool is not None:
            return self._from_spool(spool, start, end)
        parts: list[bytes] = []
        pos = start
        attempt = 0
        while pos < end:
            try:
                pos = self._ranged(pos, end, parts)
            except httpx.HTTPError as exc:
                attempt += 1
                self.stats.add(0, retries=1)
                if attempt > RETRIES:
                    raise FetchError(
                        self.url, f"bytes {pos}-{end - 1}: {type(exc).__name__}: {exc}"
                    ) from None
                continue
            except _NoRanges:
                spool = self._stream_whole()
                return self._from_spool(spool, start, end)
        return b"".join(parts)

    def _ranged(self, pos: int, end: int, parts: list[bytes]) -> int:
        headers = {"Range": f"bytes={pos}-{end - 1}", "Accept-Encoding": "identity"}
        with self.client.stream("GET", self.url, headers=headers) as response:
            self.stats.add(0, requests=1)
            if response.status_code == 200:
                raise _NoRanges
            if response.status_code != 206:
                raise FetchError(self.url, f"HTTP {response.status_code} for bytes {pos}-{end - 1}")
            first = _content_range_start(response.headers.get("content-range", ""))
            if first is not None and first != pos:
                raise FetchError(self.url, f"asked for bytes from {pos}, got from {first}")
            for chunk in response.iter_raw(CHUNK):
                take = chunk[: end - pos]
                parts.append(take)
                pos += len(take)
                self.stats.add(len(chunk))
                if pos >= end:
                    break
        if pos < end:
            raise httpx.RemoteProtocolError(f"answer ended at byte {pos}, wanted up to {end}")
        return pos

    def _stream_whole(self) -> IO[bytes]:
        with self._lock:
            if self._spool is not None:
                return self._spool
            self.mode = "streamed (server ignores Range)"
            for attempt in range(RETRIES + 1):
                spool = tempfile.TemporaryFile(dir=self._spool_dir)  # noqa: SIM115 (kept open)
                got = 0
                try:
                    with self.client.stream(
                        "GET", self.url, headers={"Accept-Encoding": "identity"}
                    ) as response:
                        self.stats.add(0, requests=1)
                        if response.status_code != 200:
                            raise FetchError(self.url, f"HTTP {response.status_code}")
                        for chunk in response.iter_raw(1 << 20):
                            spool.write(chunk)
                            got += len(chunk)
                            self.stats.add(len(chunk))
                except httpx.HTTPError as exc:
                    spool.close()
                    self.stats.add(0, retries=1)
                    if attempt == RETRIES:
                        raise FetchError(self.url, f"streaming: {exc}") from None
                    continue
                if got != self.size:
                    spool.close()
                    raise FetchError(self.url, f"streamed {got} bytes, the lock says {self.size}")
                self._spool = spool
                return spool
        raise FetchError(self.url, "unreachable")  # pragma: no cover

    def _from_spool(self, spool: IO[bytes], start: int, end: int) -> bytes:
        with self._lock:
            spool.seek(start)
            return spool.read(end - start)


class _NoRanges(Exception):
    pass


def _content_range_start(value: str) -> int | None:
    # "bytes 100-199/1000"
    try:
        return int(value.split()[1].split("-")[0])
    except (IndexError, ValueError):
        return None


def make_client(timeout_s: float = 60.0) -> httpx.Client:
    return httpx.Client(
        timeout=httpx.Timeout(timeout_s, connect=15.0),
        follow_redirects=True,
        limits=httpx.Limits(max_connections=16, max_keepalive_connections=16),
        headers={"User-Agent": "stackgate-lockcheck"},
    )
