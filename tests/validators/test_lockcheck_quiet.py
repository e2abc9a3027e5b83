"""`static --lock` is never silent for long (issue 29 item 3): on a cold cache it printed
nothing for 520 s in a newcomer's first hour. Here the wheel server is made slow for real: a
loopback proxy in front of the range server holds its first answer 20 s (a slow index), and
the piped command says, while it waits, that it is still reading and how far it has got."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.helpers.range_server import running, serve
from tests.validators.test_lockcheck import Built, built, write_lock  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def slow_proxy(upstream: str, hold_s: float) -> Iterator[str]:
    """Forwards GETs (with their Range) to upstream; the first answer waits hold_s."""
    held = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            if not held.is_set():
                held.set()
                time.sleep(hold_s)
            request = urllib.request.Request(upstream + self.path.lstrip("/"))
            if self.headers.get("Range"):
                request.add_header("Range", self.headers["Range"])
            with urllib.request.urlopen(request, timeout=30) as answer:
                body = answer.read()
                self.send_response(answer.status)
                for name in ("Content-Range", "Accept-Ranges"):
                    if answer.headers.get(name):
                        self.send_header(name, answer.headers[name])
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    with running(server):
        yield f"http://127.0.0.1:{server.server_port}/"


def test_a_slow_index_is_not_silence(built: Built, tmp_path: Path) -> None:  # noqa: F811
    with (
        serve(built.root) as server,
        slow_proxy(f"http://127.0.0.1:{server.server_port}/", hold_s=20) as base,
    ):
        lock = write_lock(
            tmp_path / "l" / "uv.lock",
            base,
            [built.wheels["torch-2.10.0"], built.wheels["sgl-kernel"]],
        )
        done = subprocess.run(
            [sys.executable, "-m", "validators", "static", "--lock", str(lock), "--cache",
             str(tmp_path / "c"), "--deadline", "300", "--request-timeout", "60",
             "--allow-local-urls"],
            capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
        )  # fmt: skip
    beats = [line for line in done.stderr.splitlines() if "still reading" in line]
    assert beats, done.stderr[-3000:]
    assert beats[0].startswith("static --lock: still reading the locked wheels by byte ranges (")
    assert "/2 wheels listed" in beats[0]
    assert done.returncode == 1, done.stderr[-3000:]  # the verdict itself is unchanged
