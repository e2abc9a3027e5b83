"""Hostile parts for the attack tests of issue 23 (sections 1 and 2): a real HTTP server on
127.0.0.1 that lies, drips or floods, and a zip writer that writes exactly the bytes a test
asks for (lying sizes, bad names, ZIP64 fields cut short), not what zipfile would.

Server behaviours (`HostileServer.mode`, changeable while it runs):
- "ranges": honest (206 with exactly the bytes asked for);
- "flood": 200 for everything, announcing and sending `flood_bytes` of zeros;
- "flood-unannounced": 200 with no Content-Length, zeros until the client hangs up;
- "drip": 206 with correct headers, then one byte every `drip_s` seconds;
- "drip-headers": the status line, then one header byte every `drip_s` seconds;
- "overlong": 206 that sends 64 KiB more than asked for;
- "wrong-range": 206 whose Content-Range starts elsewhere than asked;
- "ignore-range": 200 and the whole file;
- "redirect": `redirect_code` to `redirect_to` + the path asked for (another server).
Every request's path is counted in `requests`. With `only_suffix` set, only paths ending so
get the behaviour (the others are served honestly); a path ending in `/` serves its
folder's index.html (a PEP 503 index page).
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.helpers.range_server import running


class _Handler(BaseHTTPRequestHandler):
    server: HostileServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_HEAD(self) -> None:
        rel = self.path.split("?")[0].lstrip("/")
        path = self.server.root / rel
        if path.is_dir():
            path = path / "index.html"
        if not path.is_file():
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(path.stat().st_size))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()

    def do_GET(self) -> None:
        srv = self.server
        srv.requests.append(self.path)
        rel = self.path.split("?")[0].lstrip("/")
        path = srv.root / rel
        if path.is_dir():
            path = path / "index.html"
        data = path.read_bytes() if path.is_file() else b""
        mode = srv.mode
        if srv.only_suffix is not None and not rel.endswith(srv.only_suffix):
            mode = "ranges"
        if not data and mode in ("ranges", "ignore-range", "overlong", "wrong-range"):
            self.send_error(404)
            return
        with suppress(BrokenPipeError, ConnectionResetError):
            self._answer(srv, data, mode)

    def _answer(self, srv: HostileServer, data: bytes, mode: str) -> None:
        if mode == "redirect":
            self.send_response(srv.redirect_code)
            self.send_header("Location", srv.redirect_to + self.path.lstrip("/"))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        header = self.headers.get("Range", "")
        start, end = 0, len(data) - 1
        if header:
            first, _, last = header.removeprefix("bytes=").partition("-")
            if not first:  # "bytes=-N": the last N bytes
                start, end = max(0, len(data) - int(last)), len(data) - 1
            else:
                start, end = int(first), min(len(data) - 1, int(last) if last else len(data) - 1)
        if mode == "flood" or mode == "flood-unannounced":
            self.send_response(200)
            if mode == "flood":
                self.send_header("Content-Length", str(srv.flood_bytes))
            else:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            block = b"\0" * (1 << 16)
            sent = 0
            while sent < srv.flood_bytes:
                self.wfile.write(block)
                sent += len(block)
            return
        if mode == "drip-headers":
            self.wfile.write(b"HTTP/1.1 206 Partial Content\r\n")
            self.wfile.flush()
            for byte in b"X-Slow: " + b"a" * 10_000:
                time.sleep(srv.drip_s)
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
            return
        if mode == "ignore-range" or not header:
            body = data
            self.send_response(200)
        else:
            body = data[start : end + 1]
            shown = start + 1 if mode == "wrong-range" else start
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {shown}-{end}/{len(data)}")
            if mode == "overlong":
                body += b"\0" * (1 << 16)
        self.send_header("Content-Length", str(len(body)))
        kind = "text/html" if self.path.split("?")[0].endswith("/") else "application/octet-stream"
        self.send_header("Content-Type", kind)
        self.end_headers()
        if mode == "drip":
            for i in range(len(body)):
                self.wfile.write(body[i : i + 1])
                self.wfile.flush()
                time.sleep(srv.drip_s)
            return
        self.wfile.write(body)


class HostileServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path, mode: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.root = root
        self.mode = mode
        self.flood_bytes = 1 << 30
        self.drip_s = 1.0
        self.only_suffix: str | None = None
        self.redirect_to = ""  # base URL ending in "/" ("redirect" mode)
        self.redirect_code = 302
        self.requests: list[str] = []

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_port}/"


@contextmanager
def hostile_server(root: Path, mode: str = "ranges") -> Iterator[HostileServer]:
    server = HostileServer(root, mode)
    with running(server):
        yield server


@dataclass
class RawMember:
    """One zip entry, written as given. None fields are computed from `data`."""

    name: bytes
    data: bytes  # the bytes stored (already deflated when method is 8)
    method: int = 0
    flags: int = 0x800
    crc32: int | None = None
    size: int | None = None  # uncompressed size in the central directory
    csize: int | None = None
    extra: bytes = b""  # central directory extra field
    local_signature: bytes = b"PK\x03\x04"


def deflated(data: bytes) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    return compressor.compress(data) + compressor.flush()


def stored_member(name: str, data: bytes, **over: object) -> RawMember:
    member = RawMember(name.encode(), data, crc32=zlib.crc32(data), size=len(data))
    for key, value in over.items():
        setattr(member, key, value)
    return member


def deflated_member(name: str, data: bytes, **over: object) -> RawMember:
    packed = deflated(data)
    member = RawMember(name.encode(), packed, method=8, crc32=zlib.crc32(data), size=len(data))
    for key, value in over.items():
        setattr(member, key, value)
    return member


def raw_zip(
    members: Sequence[RawMember],
    *,
    count: int | None = None,
    cd_offset: int | None = None,
    cd_size: int | None = None,
    comment: bytes = b"",
) -> bytes:
    """A zip of exactly these entries; the end record's count, offset and size are given or
    computed."""
    out = bytearray()
    central = bytearray()
    for m in members:
        offset = len(out)
        crc = m.crc32 if m.crc32 is not None else zlib.crc32(m.data if m.method == 0 else b"")
        size = m.size if m.size is not None else len(m.data)
        csize = m.csize if m.csize is not None else len(m.data)
        out += m.local_signature + struct.pack(
            "<HHHHHIIIHH",
            20,
            m.flags,
            m.method,
            0,
            0x21,
            crc,
            csize & 0xFFFFFFFF,
            size & 0xFFFFFFFF,
            len(m.name),
            0,
        )
        out += m.name + m.data
        central += b"PK\x01\x02" + struct.pack(
            "<HHHHHHIIIHHHHHII",
            20,
            20,
            m.flags,
            m.method,
            0,
            0x21,
            crc,
            csize & 0xFFFFFFFF,
            size & 0xFFFFFFFF,
            len(m.name),
            len(m.extra),
            0,
            0,
            0,
            0o644 << 16,
            offset & 0xFFFFFFFF,
        )
        central += m.name + m.extra
    start = len(out)
    out += central
    n = len(members) if count is None else count
    out += b"PK\x05\x06" + struct.pack(
        "<HHHHIIH",
        0,
        0,
        n,
        n,
        len(central) if cd_size is None else cd_size,
        start if cd_offset is None else cd_offset,
        len(comment),
    )
    out += comment
    return bytes(out)


def crafted_wheel(folder: Path, name: str, version: str, body: bytes) -> Path:
    """Write `body` as `<name>-<version>-py3-none-any.whl` in folder."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}-py3-none-any.whl"
    path.write_bytes(body)
    return path
