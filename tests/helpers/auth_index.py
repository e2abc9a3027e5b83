"""A real PEP 503 index over HTTP on 127.0.0.1 that demands HTTP basic auth (a private index
stand-in): serves a folder made by tests.helpers.wheels.make_index, answers 401 without the
right credentials, and remembers which requests came with them."""

from __future__ import annotations

import base64
import functools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.helpers.range_server import running


@dataclass
class AuthIndex:
    url: str  # http://127.0.0.1:PORT/simple (no credentials)
    user: str
    password: str
    authorized: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def url_with_credentials(self) -> str:
        return self.url.replace("http://", f"http://{self.user}:{self.password}@", 1)


@contextmanager
def auth_index(root: Path, user: str, password: str) -> Iterator[AuthIndex]:
    """Serve root (which holds simple/) until the block ends."""
    expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    state: dict[str, AuthIndex] = {}

    class Handler(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return None

        def do_GET(self) -> None:
            index = state["index"]
            if self.headers.get("Authorization") != expected:
                index.refused.append(self.path)
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="private"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            index.authorized.append(self.path)
            super().do_GET()

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
    port = server.server_address[1]
    state["index"] = AuthIndex(f"http://127.0.0.1:{port}/simple", user, password)
    with running(server):
        yield state["index"]
