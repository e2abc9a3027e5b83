"""Threads sharing one bounded client: the pool never closes a connection a request holds.

httpcore's pool hands an idle connection to a waiting request, but the connection reads as idle
until that request's thread starts on it; another thread's pass in between closed it (expired,
or to make room) and the close could land after the request started: "[Errno 9] Bad file
descriptor" mid-answer, or a read that waits for its timeout (stackgate/http_pool.py), as the
index-page reads of builder/lock/origin.py (8 threads, one client) met it. Real parts: a
keep-alive HTTP/1.1 server on 127.0.0.1 counting what it answers, the real client and pool, and
real CPU load (busy processes); a short keep-alive makes the race frequent instead of a 5 s
coincidence. Without the fix a read fails or is asked twice in every run of the load test.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpcore
import pytest
from httpcore._sync.connection_pool import PoolRequest

from stackgate.bounded_http import Budget, Limits, get, make_client
from stackgate.http_pool import Pool
from tests.helpers.range_server import running

BODY = b"<a href='pkg-1.0-py3-none-any.whl'>pkg</a>\n" * 5000  # ~220 KB: many reads per answer


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.requests = 0
        self.cut = 0  # answers whose sending failed: the client's socket closed under them

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/simple/pkg/"


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"  # keep-alive: connections go back to the client's pool

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        with self.server.lock:
            self.server.requests += 1
        try:
            self.send_response(200)
            self.send_header("Content-Length", str(len(BODY)))
            self.end_headers()
            self.wfile.write(BODY)
        except OSError:
            with self.server.lock:
                self.server.cut += 1
            self.close_connection = True


@contextmanager
def _server() -> Iterator[_Server]:
    server = _Server()
    with running(server):
        yield server


@contextmanager
def _cpu_load(processes: int) -> Iterator[None]:
    """Busy processes, one per core of a CI runner: threads wait for a core between the pool
    handing them a connection and starting on it, which is the race's window."""
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        yield
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()


def test_many_threads_read_through_one_client_under_load() -> None:
    reads, threads = 600, 8
    failures: list[str] = []
    with (
        _server() as server,
        _cpu_load(2),
        make_client(max_connections=4, keepalive_s=0.001) as client,
    ):
        budget = Budget(Limits(request_s=10, total_s=600))

        def read(_: int) -> None:
            try:
                with get(client, server.url, budget, max_bytes=1 << 20) as answer:
                    if answer.read() != BODY:
                        failures.append("a short body")
            except Exception as exc:  # every failure is what this test is about
                failures.append(f"{type(exc).__name__}: {exc}")

        with ThreadPoolExecutor(max_workers=threads) as pool:
            list(pool.map(read, range(reads)))
    assert failures == []
    # each read asked once (none re-sent after its connection was closed under it), none cut
    assert (server.requests, server.cut) == (reads, 0)


def _pool_request(server: _Server) -> PoolRequest:
    host = f"127.0.0.1:{server.server_address[1]}".encode()
    return PoolRequest(httpcore.Request("GET", server.url, headers=[(b"Host", host)]))


@pytest.mark.parametrize("why", ["expired", "room for another host"])
def test_a_pass_leaves_a_connection_handed_to_a_request_alone(why: str) -> None:
    """The race, step by step on a real pool and a real connection: a request is handed the
    idle connection, and before it starts another thread's pass finds that connection expired
    (or wants its place for another host). httpcore's own pass closes it; this one keeps it,
    and the request then runs on it."""
    with _server() as server, _server() as other:
        pool = Pool(max_connections=1, max_keepalive_connections=1, keepalive_expiry=0.05)
        first = pool.request("GET", server.url)
        assert first.status == 200 and first.content == BODY
        (connection,) = pool._connections
        # a request handed the idle connection, its thread not yet started on it
        waiting = _pool_request(server)
        pool._requests.append(waiting)
        assert pool._assign_requests_to_connections() == []
        assert waiting.connection is connection and connection.is_idle()
        if why == "expired":
            time.sleep(0.1)
            assert connection.has_expired()
        else:  # another thread's request for another host, the pool at max_connections
            pool._requests.append(_pool_request(other))
        assert pool._assign_requests_to_connections() == []  # another thread's pass
        assert not connection.is_closed()
        answer = connection.handle_request(waiting.request)  # the request's thread starts
        assert answer.status == 200 and answer.read() == BODY
        pool._requests.clear()
        pool.close()
    assert server.requests == 2
