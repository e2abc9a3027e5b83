"""Redirects and lying HTTP framing, as the bounded reader meets them (issue 23 section 2).

Real HTTP servers on 127.0.0.1 (two of them: two ports are two origins) that redirect (301,
302, 307, 308) to the other one mid-download, to a file:// URL, in a loop; that send a chunked
body that never ends, a Content-Length that lies in either direction, a gzip bomb as
Content-Encoding. The reader must never send the index's credentials to another origin, never
follow a redirect out of http(s), never decode a body it did not ask to be encoded, and end
every answer within its byte and time bounds.
"""

from __future__ import annotations

import gzip
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from stackgate.bounded_http import Budget, LimitExceeded, Limits, get, make_client
from tests.helpers.range_server import running

GUARD_S = 60
BODY = b"wheel bytes " * 100


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        srv = self.server
        srv.seen.append((self.path, self.headers.get("Authorization")))
        action = srv.routes.get(self.path.split("?")[0], "body")
        with suppress(BrokenPipeError, ConnectionResetError):
            self._answer(action)

    def _answer(self, action: str) -> None:
        if action.startswith("redirect "):
            _, code, where = action.split(" ", 2)
            self.send_response(int(code))
            self.send_header("Location", where)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif action == "body":
            self.send_response(200)
            self.send_header("Content-Length", str(len(BODY)))
            self.end_headers()
            self.wfile.write(BODY)
        elif action == "chunked-forever":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            while True:
                self.wfile.write(b"400\r\n" + b"\0" * 1024 + b"\r\n")
                time.sleep(0.001)
        elif action == "length-short":  # announces 10 bytes, sends 1,200
            self.send_response(200)
            self.send_header("Content-Length", "10")
            self.end_headers()
            self.wfile.write(BODY)
        elif action == "length-long":  # announces 100,000, sends 1,200 and closes
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(BODY)
            self.close_connection = True
        elif action == "gzip-bomb":  # 64 MiB of zeros in ~64 KiB
            bomb = gzip.compress(b"\0" * (64 << 20), compresslevel=9)
            self.send_response(200)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(bomb)))
            self.end_headers()
            self.wfile.write(bomb)
        elif action == "gzip-transfer":  # a transfer coding HTTP/1.1 clients need not take
            self.send_response(200)
            self.send_header("Transfer-Encoding", "gzip, chunked")
            self.end_headers()
            data = gzip.compress(b"\0" * (1 << 20))
            self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.routes: dict[str, str] = {}
        self.seen: list[tuple[str, str | None]] = []

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"


@contextmanager
def _servers() -> Iterator[tuple[_Server, _Server]]:
    pair = (_Server(), _Server())
    with running(pair[0]), running(pair[1]):
        yield pair


def _fetch(url: str, *, max_bytes: int = 1 << 20, auth: httpx.Auth | None = None,
           limits: Limits | None = None) -> bytes:  # fmt: skip
    lim = limits or Limits(request_s=5.0, total_s=30.0)

    def work() -> bytes:
        budget = Budget(lim, what="the verdict")
        with (
            make_client(lim) as client,
            get(client, url, budget, max_bytes=max_bytes, auth=auth) as answer,
        ):
            if answer.status_code != 200:
                raise httpx.HTTPStatusError(str(answer.status_code), request=None, response=None)  # type: ignore[arg-type]
            return answer.read()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(work).result(timeout=GUARD_S)


@pytest.mark.parametrize("code", [301, 302, 307, 308])
def test_a_redirect_to_another_origin_never_carries_the_index_credentials(code: int) -> None:
    with _servers() as (index, other):
        index.routes["/simple/x.whl"] = f"redirect {code} {other.base}/x.whl"
        body = _fetch(f"{index.base}/simple/x.whl", auth=httpx.BasicAuth("user", "secret"))
    assert body == BODY  # followed: mirrors redirect to their storage, the bytes are checked
    assert index.seen[0][1] is not None  # the index got the credentials
    assert other.seen == [("/x.whl", None)]  # the other origin did not


@pytest.mark.parametrize(
    ("where", "said"),
    [
        ("file:///etc/passwd", "file"),
        ("ftp://127.0.0.1/x.whl", "ftp"),
    ],
)
def test_a_redirect_out_of_http_is_an_error_not_a_read(where: str, said: str) -> None:
    with _servers() as (index, _other):
        index.routes["/x.whl"] = f"redirect 302 {where}"
        with pytest.raises(httpx.UnsupportedProtocol, match=said):
            _fetch(f"{index.base}/x.whl")


def test_a_redirect_loop_ends() -> None:
    with _servers() as (index, other):
        index.routes["/a"] = f"redirect 302 {other.base}/b"
        other.routes["/b"] = f"redirect 307 {index.base}/a"
        with pytest.raises(httpx.TooManyRedirects):
            _fetch(f"{index.base}/a")
    assert len(index.seen) + len(other.seen) <= 7


def test_a_redirect_target_is_bounded_like_the_first_answer() -> None:
    with _servers() as (index, other):
        index.routes["/x.whl"] = f"redirect 307 {other.base}/x.whl"
        other.routes["/x.whl"] = "chunked-forever"
        with pytest.raises(LimitExceeded, match="runs past 65536 bytes"):
            _fetch(f"{index.base}/x.whl", max_bytes=1 << 16)


@pytest.mark.parametrize(
    ("action", "max_bytes", "error"),
    [
        ("chunked-forever", 1 << 20, "runs past 1048576 bytes"),
        ("length-long", 1 << 20, "peer closed connection|incomplete"),
    ],
)
def test_framing_that_lies_is_cut_off(action: str, max_bytes: int, error: str) -> None:
    with _servers() as (index, _other):
        index.routes["/x"] = action
        with pytest.raises((LimitExceeded, httpx.HTTPError), match=error):
            _fetch(f"{index.base}/x", max_bytes=max_bytes)


def test_a_body_longer_than_announced_is_read_as_announced() -> None:
    """Content-Length 10, 1,200 bytes sent: the answer is the 10 bytes the framing says (the
    rest is not a second answer the client would take as one)."""
    with _servers() as (index, _other):
        index.routes["/x"] = "length-short"
        assert _fetch(f"{index.base}/x") == BODY[:10]


def test_gzip_is_never_decoded() -> None:
    """The reader asks for identity and reads raw bytes: a gzip bomb is counted by the bytes
    sent (64 KiB), never inflated; a gzip transfer coding is refused by the HTTP parser."""
    with _servers() as (index, _other):
        index.routes["/bomb"] = "gzip-bomb"
        index.routes["/te"] = "gzip-transfer"
        raw = _fetch(f"{index.base}/bomb", max_bytes=1 << 20)
        assert raw[:2] == b"\x1f\x8b" and len(raw) < 1 << 20
        with pytest.raises(httpx.HTTPError):
            _fetch(f"{index.base}/te", max_bytes=1 << 20)
