"""A lean HTTP/1.1 client for streamed POSTs, built on asyncio.Protocol.

Not httpx: at high concurrency its per-request machinery puts a burst on the wire slowly enough
to skew a short window's throughput (benchmarks/serve/results/serve_bench.md). This writes a
prebuilt request in one call and parses the response in `data_received`, so every network read
is timestamped once, without a coroutine hop per SSE event. It speaks what OpenAI-compatible
servers send when streaming (status line, headers, a chunked, content-length or read-to-close
body) and reuses keep-alive connections. httpx serves everything off the measured path.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

# Called with each piece of response body as it arrives (after de-chunking).
OnBody = Callable[[bytes], None]


class HttpError(Exception):
    pass


@dataclass
class _Response:
    status: int = 0
    body_seen: bytearray = field(default_factory=bytearray)  # kept only for non-200 answers


class _Protocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = asyncio.get_running_loop().create_future()
        self._reset(None)

    def _reset(self, on_body: OnBody | None) -> None:
        self.on_body = on_body
        self.done: asyncio.Future[_Response] | None = None
        self.resp = _Response()
        self.buf = bytearray()
        self.pending: list[bytes] = []
        self.state = "head"  # head -> size / data / length / close -> finished
        self.remaining = 0
        self.keep_alive = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        try:
            self._flush()
        except Exception as problem:  # the body callback's: fail the request, no traceback
            self._fail(f"bad response body: {type(problem).__name__}: {problem}")
        if not self.closed.done():
            self.closed.set_result(None)
        if self.done is not None and not self.done.done():
            if self.state == "close":
                self.done.set_result(self.resp)
            else:
                self.done.set_exception(HttpError(f"connection closed ({exc or 'by peer'})"))

    def request(self, raw: bytes, on_body: OnBody) -> asyncio.Future[_Response]:
        self._reset(on_body)
        self.done = asyncio.get_running_loop().create_future()
        assert self.transport is not None
        self.transport.write(raw)
        return self.done

    def _body(self, data: bytes) -> None:
        if self.resp.status == 200:
            self.pending.append(data)
        else:
            self.resp.body_seen += data[:2000]

    def _flush(self) -> None:
        # One callback per network read: tokens that arrived together share one timestamp.
        if self.pending and self.on_body is not None:
            data = b"".join(self.pending)
            self.pending.clear()
            self.on_body(data)

    def _finish(self) -> None:
        self.state = "finished"
        if self.done is not None and not self.done.done():
            self.done.set_result(self.resp)

    def _fail(self, why: str) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_exception(HttpError(why))
        if self.transport is not None:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        try:
            self._parse()
        except (ValueError, IndexError) as exc:
            self._fail(f"bad HTTP response: {exc}")
            return
        try:
            self._flush()
        except Exception as exc:
            # Anything the body callback raises ends this request as failed: an exception
            # escaping a protocol callback is printed by asyncio as a traceback and leaves the
            # request waiting for its timeout.
            self._fail(f"bad response body: {type(exc).__name__}: {exc}")

    def _parse(self) -> None:
        buf = self.buf
        while buf:
            if self.state == "head":
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    return
                lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
                del buf[: end + 4]
                self.resp.status = int(lines[0].split(" ", 2)[1])
                headers = {}
                for line in lines[1:]:
                    key, _, value = line.partition(":")
                    headers[key.strip().lower()] = value.strip().lower()
                self.keep_alive = headers.get("connection") != "close"
                if "chunked" in headers.get("transfer-encoding", ""):
                    self.state = "size"
                elif "content-length" in headers:
                    self.remaining = int(headers["content-length"])
                    self.state = "length"
                    if self.remaining == 0:
                        self._finish()
                        return
                else:
                    self.state = "close"
                    self.keep_alive = False
            elif self.state == "size":
                end = buf.find(b"\r\n")
                if end < 0:
                    return
                size = int(bytes(buf[:end]).split(b";", 1)[0], 16)
                del buf[: end + 2]
                if size == 0:
                    self.state = "trailer"
                else:
                    self.remaining = size
                    self.state = "data"
            elif self.state in ("data", "length"):  # a chunk's bytes, or a sized body's
                take = bytes(buf[: self.remaining])
                del buf[: len(take)]
                self.remaining -= len(take)
                self._body(take)
                if self.remaining == 0 and self.state == "length":
                    self._finish()
                    return
                if self.remaining == 0:
                    self.state = "crlf"
            elif self.state == "crlf":
                if len(buf) < 2:
                    return
                del buf[:2]
                self.state = "size"
            elif self.state == "trailer":
                end = buf.find(b"\r\n")
                if end < 0:
                    return
                del buf[: end + 2]
                if end == 0:
                    self._finish()
                    return
            elif self.state == "close":
                take = bytes(buf)
                buf.clear()
                self._body(take)
            else:  # bytes after a finished response: not ours to interpret
                buf.clear()


class StreamingClient:
    """POST JSON, feed the body to a callback as it arrives; connections kept alive."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or parts.hostname is None:
            raise ValueError(f"only http:// URLs are supported, not {base_url}")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.idle: list[_Protocol] = []

    async def _connect(self) -> _Protocol:
        while self.idle:
            proto = self.idle.pop()
            if proto.transport is not None and not proto.transport.is_closing():
                return proto
        loop = asyncio.get_running_loop()
        _, proto = await loop.create_connection(_Protocol, self.host, self.port)
        return proto

    async def post_stream(
        self, path: str, payload: dict[str, Any], on_body: OnBody
    ) -> tuple[int, bytes]:
        """(status, error body for non-200). on_body gets the 200 body piece by piece."""
        body = json.dumps(payload).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        proto = await self._connect()
        try:
            resp = await proto.request(head + body, on_body)
        except BaseException:
            if proto.transport is not None:
                proto.transport.close()
            raise
        if proto.keep_alive and proto.state == "finished" and proto.transport is not None:
            self.idle.append(proto)
        elif proto.transport is not None:
            proto.transport.close()
        return resp.status, bytes(resp.body_seen)

    def abandon(self) -> None:
        """Close every idle connection."""
        for proto in self.idle:
            if proto.transport is not None:
                proto.transport.close()
        self.idle.clear()
