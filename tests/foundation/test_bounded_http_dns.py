"""Name resolution is inside the deadline (issue 23: "DNS time is unbounded").

getaddrinfo has no timeout: a resolver that never answers hung a request of the bounded reader
however short its deadline. The resolver here is injected (`make_client(resolver=...)`): a
function that blocks on an event nobody sets stands for a DNS server that never answers; the
connection that follows is a real TCP connection to a real HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from stackgate.bounded_http import Budget, LimitExceeded, Limits, get, make_client
from tests.helpers.range_server import running

GUARD_S = 60  # a request that has not ended by then hangs: the bug this file is about


class _Ok(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body = f"host={self.headers.get('Host')}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def _server() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    server.daemon_threads = True
    with running(server):
        yield server.server_port


def _never(release: threading.Event) -> Callable[[str, int], Sequence[str]]:
    def resolve(host: str, port: int) -> Sequence[str]:
        release.wait()
        raise OSError("released")

    return resolve


def _fetch(url: str, limits: Limits, resolver: Callable[[str, int], Sequence[str]]) -> bytes:
    """One bounded GET on a worker thread, guarded: the test fails rather than hangs."""

    def work() -> bytes:
        budget = Budget(limits, what="the verdict")
        with (
            make_client(limits, resolver=resolver) as client,
            get(client, url, budget, max_bytes=1024) as answer,
        ):
            return answer.read()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(work).result(timeout=GUARD_S)


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # lets the resolver threads left behind end


def test_a_resolver_that_never_answers_is_cut_off_by_the_request_deadline(
    release: threading.Event,
) -> None:
    limits = Limits(request_s=1.0, total_s=600.0, connect_s=600.0)
    with pytest.raises(LimitExceeded, match="no complete answer within its deadline"):
        _fetch("http://pypi.example/simple/", limits, _never(release))


def test_and_by_the_verdict_deadline(release: threading.Event) -> None:
    limits = Limits(request_s=600.0, total_s=1.0, connect_s=600.0)
    with pytest.raises(LimitExceeded, match="the verdict passed its 1 s deadline"):
        _fetch("http://pypi.example/simple/", limits, _never(release))


def test_and_by_the_connect_timeout_naming_the_host(release: threading.Event) -> None:
    limits = Limits(request_s=600.0, total_s=600.0, connect_s=1.0)
    with pytest.raises(httpx.ConnectTimeout, match=r"resolving pypi\.example took over 1 s"):
        _fetch("http://pypi.example/simple/", limits, _never(release))


def test_resolved_addresses_are_tried_in_order_and_the_host_is_kept() -> None:
    """A resolver's answer is connected to (the first address refusing, the next one
    answering), and the request still names the host (Host header, TLS server name)."""
    with _server() as port:
        body = _fetch(
            f"http://pypi.example:{port}/x",
            Limits(request_s=10.0),
            lambda host, p: ["127.0.0.2", "127.0.0.1"] if host == "pypi.example" else [],
        )
    assert body == f"host=pypi.example:{port}".encode()


@pytest.mark.parametrize(
    ("resolver", "said"),
    [
        (lambda host, port: [], "cannot resolve pypi.example: no address"),
        (lambda host, port: (_ for _ in ()).throw(OSError("Name or service not known")),
         "cannot resolve pypi.example: Name or service not known"),
    ],
)
def test_a_name_that_does_not_resolve_is_a_connect_error_naming_it(
    resolver: Callable[[str, int], Sequence[str]], said: str
) -> None:
    with pytest.raises(httpx.ConnectError, match=said):
        _fetch("http://pypi.example/simple/", Limits(request_s=10.0), resolver)
