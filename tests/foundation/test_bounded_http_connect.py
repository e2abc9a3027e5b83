"""A connection that cannot be set up is tried again (stackgate/bounded_http.py
STALE_CONNECTION_RETRIES, CONNECT_PAUSE_S): a real TLS server on 127.0.0.1, with a certificate
made here by the `openssl` command and trusted through SSL_CERT_FILE, aborts the handshake of
its first connections with a fatal "decode error" alert, as PyPI's edge once did to a build's
origin check, then answers; a server that always aborts is asked a bounded number of times."""

from __future__ import annotations

import socketserver
import ssl
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from stackgate.bounded_http import STALE_CONNECTION_RETRIES, Budget, Limits, get, make_client
from tests.helpers.range_server import running

BODY = b"simple page " * 50
# TLS record: alert (21), TLS 1.2, length 2: fatal (2), decode_error (50)
DECODE_ERROR_ALERT = bytes([21, 3, 3, 0, 2, 2, 50])


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, context: ssl.SSLContext, abort_first: int) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.context = context
        self.abort_first = abort_first
        self.connections = 0
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server_address[1]}/simple/pkg/"


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        srv = self.server
        with srv.lock:
            srv.connections += 1
            number = srv.connections
        if number <= srv.abort_first:
            self.request.recv(4096)  # the ClientHello
            self.request.sendall(DECODE_ERROR_ALERT)
            return
        with srv.context.wrap_socket(self.request, server_side=True) as tls:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = tls.recv(4096)
                if not chunk:
                    return
                data += chunk
            tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


@contextmanager
def _server(certificate: tuple[Path, Path], abort_first: int) -> Iterator[_Server]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)
    server = _Server(context, abort_first)
    with running(server):
        yield server


def _read(client: httpx.Client, url: str) -> bytes:
    with get(client, url, Budget(Limits(request_s=20, total_s=60)), max_bytes=1 << 20) as answer:
        assert answer.status_code == 200
        return answer.read()


def test_a_handshake_the_server_aborts_is_tried_again(
    certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
    with _server(certificate, abort_first=STALE_CONNECTION_RETRIES) as server, make_client() as c:
        assert _read(c, server.url) == BODY
    assert server.connections == STALE_CONNECTION_RETRIES + 1


def test_a_server_that_always_aborts_is_asked_a_bounded_number_of_times(
    certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
    with (
        _server(certificate, abort_first=100) as server,
        make_client() as client,
        pytest.raises(httpx.ConnectError, match=r"DECODE_ERROR|decode error"),
    ):
        _read(client, server.url)
    assert server.connections == STALE_CONNECTION_RETRIES + 1
