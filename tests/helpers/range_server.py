"""A real HTTP file server on 127.0.0.1 for the pre-install checks, in three behaviours:

- "ranges": answers `Range: bytes=a-b` with 206 and exactly those bytes (as PyPI's host does);
- "ignore-range": answers every GET with 200 and the whole file (servers without ranges);
- "drop-once": like "ranges", but the first answer longer than 64 KiB is cut off halfway by
  closing the connection (a network drop mid-member).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

JSON_INDEX = "application/vnd.pypi.simple.v1+json"


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_HEAD(self) -> None:  # uv asks a wheel's size first
        path = self.server.root / self.path.lstrip("/").split("?")[0]
        if not path.is_file():
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(path.stat().st_size))
        self.send_header("Accept-Ranges", "none" if self.server.mode == "ignore-range" else "bytes")
        self.end_headers()

    def do_GET(self) -> None:
        path = self.server.root / self.path.lstrip("/").split("?")[0]
        if path.is_dir():  # an index page: PEP 691 JSON where asked for and made, else PEP 503
            wants_json = JSON_INDEX in self.headers.get("Accept", "")
            path = path / ("index.json" if wants_json and (path / "index.json").is_file()
                           else "index.html")  # fmt: skip
        if not path.is_file():
            self.send_error(404)
            return
        data = path.read_bytes()
        header = self.headers.get("Range")
        self.server.requests += 1
        if header and self.server.mode != "ignore-range":
            first, _, last = header.removeprefix("bytes=").partition("-")
            start, end = int(first), min(len(data) - 1, int(last) if last else len(data) - 1)
            body = data[start : end + 1]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        else:
            body = data
            self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        if path.suffix in (".html", ".json"):
            self.send_header("Content-Type", JSON_INDEX if path.suffix == ".json" else "text/html")
        self.send_header("Accept-Ranges", "none" if self.server.mode == "ignore-range" else "bytes")
        self.end_headers()
        if self.server.mode == "drop-once" and not self.server.dropped and len(body) > 65536:
            self.server.dropped = True
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path, mode: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.root = root
        self.mode = mode
        self.dropped = False
        self.requests = 0


@contextmanager
def running(server: ThreadingHTTPServer) -> Iterator[None]:
    """Serve on a thread until the block ends, then shut down and close."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@contextmanager
def serve(root: Path, mode: str = "ranges") -> Iterator[_Server]:
    """Serve `root`; the server's base URL is `f"http://127.0.0.1:{server.server_port}/"`."""
    server = _Server(root, mode)
    with running(server):
        yield server
