"""The one way stackgate reads from a server it does not own: every GET bounded in bytes and in
time, whatever the server says or does.

- Bytes: an answer may carry at most `max_bytes` (a Content-Length above it is refused before
  the body is read; a body that runs past it is cut off and refused).
- Time: each request has a deadline (`Limits.request_s` plus the bytes asked for at
  `Limits.min_rate` bytes/s), and a run of requests (one verdict, one wheelhouse) has one
  more (`Limits.total_s`). The deadline bounds every socket operation of the request, headers
  included: a server that sends a byte every few seconds is cut off when the deadline passes,
  not when it stops sending. The socket timeouts of httpcore are per operation; the network
  backend here clamps each operation's timeout to what is left of the deadline. Name
  resolution is one of them: getaddrinfo has no timeout of its own (a resolver that never
  answers hung the request), so it runs in a thread the request waits for only until its
  connect timeout or deadline.

Failures are `LimitExceeded` (naming the URL and the limit) or httpx's own errors.
"""

from __future__ import annotations

import contextlib
import contextvars
import socket
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

# re-exported: the bounds and their flags live apart so that a parser needs no httpx
from stackgate.http_limits import KIB as KIB
from stackgate.http_limits import MIB as MIB
from stackgate.http_limits import Limits as Limits
from stackgate.http_limits import add_limit_arguments as add_limit_arguments
from stackgate.http_limits import limits_from as limits_from
from stackgate.http_pool import Pool, ProxyPool
from stackgate.url_targets import checked_hop

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "stackgate_http_deadline", default=None
)


class LimitExceeded(Exception):
    """A server's answer broke a bound: too many bytes, or too slow."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{url}: {reason}")
        self.url = url
        self.reason = reason


class Deadline:
    """The end of a run of requests (monotonic clock)."""

    def __init__(self, seconds: float, what: str) -> None:
        self.seconds = seconds
        self.what = what
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


class Budget:
    """Limits plus the run's deadline: what each request of the run may take."""

    def __init__(self, limits: Limits | None = None, *, what: str = "this run") -> None:
        self.limits = limits or Limits()
        self.total = Deadline(self.limits.total_s, what)

    def request_seconds(self, nbytes: int) -> float:
        return self.limits.request_s + max(0, nbytes) / self.limits.min_rate


class _Timeout(Exception):
    pass


def _clamp(timeout: float | None) -> float | None:
    end = _DEADLINE.get()
    if end is None:
        return timeout
    left = end - time.monotonic()
    if left <= 0:
        raise _Timeout
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            return self._inner.read(max_bytes, _clamp(timeout))
        except _Timeout:
            raise httpcore.ReadTimeout("the request's deadline passed") from None

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        try:
            self._inner.write(buffer, _clamp(timeout))
        except _Timeout:
            raise httpcore.WriteTimeout("the request's deadline passed") from None

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        try:
            return _Stream(self._inner.start_tls(ssl_context, server_hostname, _clamp(timeout)))
        except _Timeout:
            raise httpcore.ConnectTimeout("the request's deadline passed") from None

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


# (host, port) -> the addresses to connect to, as the system's resolver gives them; tests
# inject one that stands for a resolver that never answers.
Resolver = Callable[[str, int], Sequence[str]]


def system_resolver(host: str, port: int) -> list[str]:
    """The host's addresses for TCP, in the order getaddrinfo gives them."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _resolve(resolver: Resolver, host: str, port: int, timeout: float | None) -> list[str]:
    """`resolver(host, port)`, waited for at most `timeout` seconds (in a daemon thread: a
    resolver stuck in getaddrinfo cannot be interrupted, only left behind)."""
    done = threading.Event()
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["addresses"] = list(resolver(host, port))
        except Exception as exc:  # handed to the caller
            box["error"] = exc
        done.set()

    threading.Thread(target=work, name=f"resolve {host}", daemon=True).start()
    if not done.wait(timeout):
        raise httpcore.ConnectTimeout(f"resolving {host} took over {timeout:.3g} s")
    if "error" in box:
        raise httpcore.ConnectError(f"cannot resolve {host}: {box['error']}")
    addresses: list[str] = box["addresses"]
    if not addresses:
        raise httpcore.ConnectError(f"cannot resolve {host}: no address")
    return addresses


def _is_address(host: str) -> bool:
    try:
        socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
    except (OSError, ValueError):
        return False
    return True


class _Backend(httpcore.NetworkBackend):
    def __init__(self, resolver: Resolver | None = None) -> None:
        self._inner = httpcore.SyncBackend()
        self._resolver = resolver or system_resolver

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            clamped = _clamp(timeout)
        except _Timeout:
            raise httpcore.ConnectTimeout("the request's deadline passed") from None
        end = None if clamped is None else time.monotonic() + clamped
        options = list(socket_options or [])
        addresses = [host] if _is_address(host) else _resolve(self._resolver, host, port, clamped)
        failure: Exception | None = None
        for address in addresses:
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                raise httpcore.ConnectTimeout(f"connecting to {host} took over {clamped:.3g} s")
            try:
                stream = self._inner.connect_tcp(address, port, left, local_address, options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
                continue
            return _Stream(stream)
        assert failure is not None
        raise failure

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are not used")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


# Seconds an idle kept-alive connection is kept for the next request.
KEEPALIVE_S = 5.0


class _Transport(httpx.HTTPTransport):
    """httpx's transport with the deadline-clamping network backend (through `proxy`, an
    http:// forward proxy, when given), over a pool that never closes a connection a request
    holds (stackgate.http_pool)."""

    def __init__(
        self,
        max_connections: int,
        proxy: str | None = None,
        resolver: Resolver | None = None,
        keepalive_s: float = KEEPALIVE_S,
    ) -> None:
        super().__init__()
        context = httpx.create_ssl_context()
        if proxy is None:
            self._pool = Pool(
                ssl_context=context,
                max_connections=max_connections,
                max_keepalive_connections=max_connections,
                keepalive_expiry=keepalive_s,
                network_backend=_Backend(resolver),
            )
            return
        spec = httpx.Proxy(url=proxy)
        self._pool = ProxyPool(
            proxy_url=httpcore.URL(
                scheme=spec.url.raw_scheme,
                host=spec.url.raw_host,
                port=spec.url.port,
                target=spec.url.raw_path,
            ),
            proxy_auth=spec.raw_auth,
            proxy_headers=spec.headers.raw,
            ssl_context=context,
            max_connections=max_connections,
            max_keepalive_connections=max_connections,
            keepalive_expiry=keepalive_s,
            network_backend=_Backend(resolver),
        )


def _mounts(
    max_connections: int, resolver: Resolver | None, keepalive_s: float
) -> dict[str, httpx.BaseTransport]:
    """The proxies of the environment (HTTP(S)_PROXY, ALL_PROXY, NO_PROXY, as curl and uv read
    them), each through the deadline-clamping transport: httpx's own would bypass it."""
    found = urllib.request.getproxies_environment()
    mounts: dict[str, httpx.BaseTransport] = {}
    for scheme in ("http", "https"):
        url = found.get(scheme) or found.get("all")
        if url:
            if "://" not in url:
                url = f"http://{url}"
            mounts[f"{scheme}://"] = _Transport(
                max_connections, proxy=url, resolver=resolver, keepalive_s=keepalive_s
            )
    for host in (h.strip() for h in found.get("no", "").split(",")):
        if host == "*":
            return {}
        if host and "/" not in host:  # a CIDR range is not a host pattern httpx takes
            pattern = f"all://*{host}" if host.startswith(".") else f"all://{host}"
            mounts[pattern] = _Transport(
                max_connections, resolver=resolver, keepalive_s=keepalive_s
            )
    return mounts


def make_client(
    limits: Limits | None = None,
    *,
    max_connections: int = 16,
    headers: Mapping[str, str] | None = None,
    auth: httpx.Auth | None = None,
    resolver: Resolver | None = None,
    keepalive_s: float = KEEPALIVE_S,
) -> httpx.Client:
    """A client whose requests honour the deadlines set by `get`, through the environment's
    proxies (`_mounts`); `resolver` (tests) stands for the system's name resolution. One
    client may be shared by threads; an idle connection is kept `keepalive_s` seconds."""
    lim = limits or Limits()
    return httpx.Client(
        transport=_Transport(max_connections, resolver=resolver, keepalive_s=keepalive_s),
        mounts=_mounts(max_connections, resolver, keepalive_s),
        trust_env=False,
        timeout=httpx.Timeout(lim.request_s, connect=lim.connect_s),
        follow_redirects=True,
        max_redirects=5,
        headers={"User-Agent": "stackgate", **(headers or {})},
        auth=auth,
        event_hooks={"request": [checked_hop]} if lim.refuse_local_targets else None,
    )


@dataclass
class Answer:
    """An answer being read: status, headers, and its body as bounded chunks."""

    url: str
    status_code: int
    headers: httpx.Headers
    _response: httpx.Response
    _max_bytes: int
    _end: float
    _limit_text: str
    _timeout_text: str
    received: int = 0

    @property
    def final_url(self) -> str:
        """The URL answered, after redirects."""
        return str(self._response.url)

    def chunks(self) -> Iterator[bytes]:
        """The body as it arrives (each network read), never more than max_bytes in all."""
        length = self.headers.get("content-length", "").strip()
        if length.isdigit() and int(length) > self._max_bytes:
            raise LimitExceeded(
                self.url,
                f"the server announces {int(length)} bytes, more than {self._max_bytes} "
                f"({self._limit_text})",
            )
        for chunk in self._response.iter_raw():
            self.received += len(chunk)
            if self.received > self._max_bytes:
                raise LimitExceeded(
                    self.url, f"the answer runs past {self._max_bytes} bytes ({self._limit_text})"
                )
            if time.monotonic() > self._end:
                raise LimitExceeded(self.url, self._timeout_text)
            yield chunk

    def read(self) -> bytes:
        return b"".join(self.chunks())


@contextmanager
def get(
    client: httpx.Client,
    url: str,
    budget: Budget,
    *,
    max_bytes: int,
    expect_bytes: int | None = None,
    headers: Mapping[str, str] | None = None,
    limit_text: str = "",
    auth: httpx.Auth | None = None,
) -> Iterator[Answer]:
    """GET `url`, its answer bounded to `max_bytes` and its time to the request's deadline
    (`expect_bytes`, default max_bytes, sets it) and the run's. Deadline and size failures
    are LimitExceeded; network failures httpx's errors."""
    seconds = budget.request_seconds(max_bytes if expect_bytes is None else expect_bytes)
    left = budget.total.left()
    if left <= 0:
        raise LimitExceeded(url, _total_text(budget))
    end = time.monotonic() + min(seconds, left)
    text = limit_text or f"{max_bytes} bytes, {min(seconds, left):.0f} s"
    # Whichever bound set the end is the one a timeout names: a request cut short by the
    # run's deadline reports the run's deadline, however close the two clocks read.
    timeout_text = (
        _total_text(budget)
        if left <= seconds
        else f"no complete answer within its deadline ({text})"
    )
    token = _DEADLINE.set(end)
    try:
        with _first_answer(client, url, headers, auth) as response:
            yield Answer(
                url,
                response.status_code,
                response.headers,
                response,
                max_bytes,
                end,
                text,
                timeout_text,
            )
    except httpx.TimeoutException as exc:
        if time.monotonic() >= end - 0.05:
            raise LimitExceeded(url, timeout_text) from None
        raise exc
    finally:
        _DEADLINE.reset(token)


# A GET whose connection fails before any byte of an answer arrives is sent again on a new
# connection, up to this many more times within its deadline: a pooled keep-alive connection
# the server shut between two requests fails that way ("Server disconnected", a reset), as
# urllib3 and uv retry it too. (The pool closing a connection under a request from another
# thread, which read as EBADF, is prevented where it happened: stackgate.http_pool.)
# Nothing that arrived is ever re-read: a failure after the status line is not retried.
# A connection that cannot be set up (refused, a TLS handshake the far end aborts: PyPI's edge
# once answered a handshake with "tlsv1 alert decode error" and a build's origin check failed)
# is tried again the same way, after a short pause, since no byte of the request was sent.
STALE_CONNECTION_RETRIES = 2
CONNECT_PAUSE_S = 0.5


@contextmanager
def _first_answer(
    client: httpx.Client,
    url: str,
    headers: Mapping[str, str] | None,
    auth: httpx.Auth | None,
) -> Iterator[httpx.Response]:
    for attempt in range(STALE_CONNECTION_RETRIES + 1):
        stream = client.stream(
            "GET",
            url,
            headers={"Accept-Encoding": "identity", **(headers or {})},
            auth=auth if auth is not None else httpx.USE_CLIENT_DEFAULT,
        )
        try:
            response = stream.__enter__()
        except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError):
            if attempt == STALE_CONNECTION_RETRIES:
                raise
            continue
        except httpx.ConnectError:
            if attempt == STALE_CONNECTION_RETRIES:
                raise
            time.sleep(CONNECT_PAUSE_S * (attempt + 1))
            continue
        break
    with contextlib.ExitStack() as closing:
        closing.push(stream)
        yield response


def _total_text(budget: Budget) -> str:
    return f"{budget.total.what} passed its {budget.total.seconds:g} s deadline"
