"""Byte ranges of a remote file over HTTP, counted.

Every read asks for an exact range (`Range: bytes=a-b`) and consumes the whole answer, so the
byte count is what crossed the wire into this process. A server that answers a range request
with 200 and the whole body does not support ranges: the file is then streamed once into a
temporary spool file and every later read is served from it (said in `RemoteFile.mode`).
A connection dropped mid-read is retried from where it stopped, a few times. Every request
is bounded in bytes and time (`stackgate.bounded_http`); a bound broken is not retried.
"""

from __future__ import annotations

import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx

from stackgate.bounded_http import Budget, LimitExceeded, Limits, get
from stackgate.bounded_http import make_client as bounded_client

RETRIES = 3


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
    """One remote file of known size; thread-safe reads of [start, end).

    Every request goes through `stackgate.bounded_http`: a range answer may not run past the
    bytes asked for, a whole-file answer not past the lock's size, and each request and the
    whole verdict have a deadline (`budget`)."""

    def __init__(
        self,
        client: httpx.Client,
        url: str,
        size: int,
        spool_dir: Path,
        budget: Budget | None = None,
    ) -> None:
        self.client = client
        self.url = url
        self.size = size
        self.mode = "ranges"  # or "streamed (server ignores Range)"
        self.stats = FetchStats()
        self.budget = budget or Budget(what="the pre-install verdict")
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
            except LimitExceeded as exc:
                raise FetchError(self.url, exc.reason) from None
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
        headers = {"Range": f"bytes={pos}-{end - 1}"}
        with get(
            self.client,
            self.url,
            self.budget,
            max_bytes=end - pos,
            headers=headers,
            limit_text=f"bytes {pos}-{end - 1} of {self.size}",
        ) as answer:
            self.stats.add(0, requests=1)
            if answer.status_code == 200:
                raise _NoRanges
            if answer.status_code != 206:
                raise FetchError(self.url, f"HTTP {answer.status_code} for bytes {pos}-{end - 1}")
            first = _content_range_start(answer.headers.get("content-range", ""))
            if first is None or first != pos:
                raise FetchError(
                    self.url,
                    f"asked for bytes from {pos}, the answer's Content-Range says "
                    f"{answer.headers.get('content-range', '(none)')!r}",
                )
            for chunk in answer.chunks():
                parts.append(chunk)
                pos += len(chunk)
                self.stats.add(len(chunk))
        if pos < end:
            raise httpx.RemoteProtocolError(f"answer ended at byte {pos}, wanted up to {end}")
        return pos

    def _stream_whole(self) -> IO[bytes]:
        with self._lock:
            if self._spool is not None:
                return self._spool
            for attempt in range(RETRIES + 1):
                spool = tempfile.TemporaryFile(dir=self._spool_dir)  # noqa: SIM115 (kept open)
                got = 0
                try:
                    with get(
                        self.client,
                        self.url,
                        self.budget,
                        max_bytes=self.size,
                        limit_text=f"the lock's size of the wheel, {self.size} bytes",
                    ) as answer:
                        self.stats.add(0, requests=1)
                        if answer.status_code != 200:
                            raise FetchError(self.url, f"HTTP {answer.status_code}")
                        for chunk in answer.chunks():
                            spool.write(chunk)
                            got += len(chunk)
                            self.stats.add(len(chunk))
                except LimitExceeded as exc:
                    spool.close()
                    raise FetchError(self.url, exc.reason) from None
                except FetchError:
                    spool.close()
                    raise
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
                self.mode = "streamed (server ignores Range)"
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


def make_client(limits: Limits | None = None) -> httpx.Client:
    return bounded_client(limits, headers={"User-Agent": "stackgate-lockcheck"})
