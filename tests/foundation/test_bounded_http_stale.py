"""A connection that fails before any answer arrives, as the bounded reader meets it.

A keep-alive connection the server shuts just as the next request goes out (its idle timeout,
a restart), or one the pool closed from another thread as expired, fails the request before a
status line arrives: "Server disconnected without sending a response", EBADF. Such a GET is
sent again on a new connection (stackgate/bounded_http.py STALE_CONNECTION_RETRIES); a
failure after the answer began is never retried, and a server that never answers is not
asked forever. A real TCP server on 127.0.0.1 that counts connections and requests.
"""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from stackgate.bounded_http import STALE_CONNECTION_RETRIES, Budget, Limits, get, make_client
from tests.helpers.range_server import running

BODY = b"simple page " * 50


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, behaviour: str, drop_first: int = 0) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.behaviour = behaviour
        self.drop_first = drop_first  # connections closed on their first request
        self.connections = 0
        self.requests = 0
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/simple/pkg/"


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        srv = self.server
        with srv.lock:
            srv.connections += 1
            number = srv.connections
        served_here = 0
        while self._read_request():
            with srv.lock:
                srv.requests += 1
            if srv.behaviour == "never-answers" or number <= srv.drop_first:
                return  # closes without a byte of answer
            if srv.behaviour == "keepalive-then-drop" and served_here == 1:
                return  # the second request on a kept-alive connection: shut, no answer
            if srv.behaviour == "body-cut":
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 600\r\n\r\n" + BODY[:10])
                return
            self.wfile.write(
                b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY
            )
            served_here += 1

    def _read_request(self) -> bool:
        try:
            line = self.rfile.readline()
            while line not in (b"\r\n", b"\n", b""):
                line = self.rfile.readline()
        except OSError:
            return False
        return line != b""


@contextmanager
def _server(behaviour: str, drop_first: int = 0) -> Iterator[_Server]:
    server = _Server(behaviour, drop_first)
    with running(server):
        yield server


def _read(client: httpx.Client, url: str) -> bytes:
    with get(client, url, Budget(Limits(request_s=20, total_s=60)), max_bytes=1 << 20) as answer:
        assert answer.status_code == 200
        return answer.read()


def test_a_connection_shut_before_the_answer_is_asked_again() -> None:
    with _server("answers", drop_first=STALE_CONNECTION_RETRIES) as server, make_client() as c:
        assert _read(c, server.url) == BODY
    assert server.connections == STALE_CONNECTION_RETRIES + 1
    assert server.requests == STALE_CONNECTION_RETRIES + 1


def test_a_kept_alive_connection_shut_as_the_next_request_goes_out() -> None:
    """The stale keep-alive race: the pool reuses a connection the server is shutting."""
    with _server("keepalive-then-drop") as server, make_client() as client:
        assert [_read(client, server.url) for _ in range(3)] == [BODY] * 3
    # 1st on connection 1; 2nd dropped there, answered on connection 2; 3rd dropped on
    # connection 2, answered on connection 3
    assert (server.connections, server.requests) == (3, 5)


@pytest.mark.parametrize(
    ("behaviour", "asked"),
    [
        ("never-answers", STALE_CONNECTION_RETRIES + 1),  # asked a bounded number of times
        ("body-cut", 1),  # an answer cut after it began is not asked again
    ],
)
def test_failures_are_asked_again_only_before_an_answer_began(behaviour: str, asked: int) -> None:
    with (
        _server(behaviour) as server,
        make_client() as client,
        pytest.raises(httpx.RemoteProtocolError),
    ):
        _read(client, server.url)
    assert server.requests == asked


def test_a_closed_socket_reads_as_ebadf_which_is_a_read_error() -> None:
    """What EBADF looks like through httpcore: the class the retry catches."""
    left, right = socket.socketpair()
    left.close()
    with pytest.raises(OSError) as raised:
        left.recv(1)
    right.close()
    assert raised.value.errno == 9
