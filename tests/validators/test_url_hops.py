"""A URL from an untrusted lock may not lead to this host: not through the host's own
non-loopback addresses, and not through a redirect (each hop judged as the first URL is).

Real servers on this host count what reaches them; `validators static --lock` runs as a real
process. Redirects are served by a real forward proxy on loopback (HTTP_PROXY, honoured as uv
and curl honour it) that answers the lock's URL, at a name that resolves nowhere (an allowed
host: the rule cannot refuse it), with 302 to where the attacker wants the next request.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from stackgate.host_addresses import own_addresses, parse_fib_trie, parse_if_inet6
from stackgate.url_targets import local_target
from tests.validators.test_lockcheck_hostile import honest, write_lock

ROOT = Path(__file__).resolve().parents[2]

# Recorded on the test host (a container with eth0 192.0.2.2/24, fd00::2 and a link-local).
FIB_TRIE = """Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
     +-- 192.0.2.0/24 2 0 2
        +-- 192.0.2.0/30 2 0 2
           |-- 192.0.2.0
              /24 link UNICAST
           |-- 192.0.2.2
              /32 host LOCAL
        |-- 192.0.2.255
           /32 link BROADCAST
"""
IF_INET6 = """fd000000000000000000000000000002 04 40 00 82     eth0
00000000000000000000000000000001 01 80 10 80       lo
fe8000000000000000fc00fffe000001 04 40 20 80     eth0
"""


def test_the_kernels_tables_give_every_own_address() -> None:
    assert {str(a) for a in parse_fib_trie(FIB_TRIE)} == {"127.0.0.1", "192.0.2.2"}
    assert {str(a) for a in parse_if_inet6(IF_INET6)} == {"fd00::2", "::1", "fe80::fc:ff:fe00:1"}
    assert parse_fib_trie("garbage\n|-- not-an-address\n   /32 host LOCAL\n") == set()


def _non_loopback_own() -> list[str]:
    return sorted(str(a) for a in own_addresses() if not a.is_loopback and not a.is_link_local)


def test_this_hosts_own_addresses_are_this_host() -> None:
    """Every address `hostname -I` lists is found and refused (control: a documentation
    address of no interface here is not)."""
    if shutil.which("hostname"):
        listed = subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split()
    else:  # no hostname(1): the addresses this host's name resolves to
        infos = socket.getaddrinfo(socket.gethostname(), None, proto=socket.IPPROTO_TCP)
        listed = sorted({str(i[4][0]).split("%", 1)[0] for i in infos})
    own = {str(a) for a in own_addresses()}
    assert set(listed) <= own, (listed, own)
    for address in listed:
        host = f"[{address}]" if ":" in address else address
        why = local_target(f"http://{host}:8080/admin") or ""
        assert "an address of this host" in why or "loopback" in why, (address, why)
    assert local_target("http://198.51.100.7/simple") is None


@contextmanager
def _counting(host: str) -> Iterator[tuple[ThreadingHTTPServer, list[str]]]:
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    server = type("S", (ThreadingHTTPServer,), {"address_family": family, "daemon_threads": True})(
        (host, 0), Handler
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server, seen
    finally:
        server.shutdown()
        server.server_close()


def _static(lock: Path, tmp_path: Path, *extra: str, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:  # fmt: skip
    argv = [sys.executable, "-m", "validators", "static", "--lock", str(lock), "--cache",
            str(tmp_path / "cache"), "--request-timeout", "3", "--deadline", "30", *extra]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env=env or {**os.environ, "NO_COLOR": "1"})  # fmt: skip


@pytest.mark.parametrize("family", ["v4", "v6"])
def test_a_lock_url_at_this_hosts_own_address_is_refused(tmp_path: Path, family: str) -> None:
    """A service bound to every address (0.0.0.0 / ::) is reached through the host's own
    non-loopback address as through 127.0.0.1: refused, exit 2, nothing reaches it; with
    --allow-local-urls it is reached (control)."""
    own = [a for a in _non_loopback_own() if (":" in a) == (family == "v6")]
    if not own:
        pytest.skip(f"this host has no non-loopback {family} address")
    with _counting("::" if family == "v6" else "0.0.0.0") as (server, seen):
        host = f"[{own[0]}]" if family == "v6" else own[0]
        url = f"http://{host}:{server.server_port}/admin/evil-1.0-py3-none-any.whl"
        lock = write_lock(tmp_path / "uv.lock", url, honest())
        done = _static(lock, tmp_path)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "an address of this host" in done.stderr and seen == []
        assert done.stderr.strip().splitlines()[-1].startswith("REFUSED")
        allowed = _static(lock, tmp_path, "--allow-local-urls")
        assert seen, allowed.stdout + allowed.stderr


@contextmanager
def _redirecting_proxy(hops: dict[str, str]) -> Iterator[tuple[str, list[str]]]:
    """A forward proxy on loopback: a request for a URL in `hops` is answered 302 to its
    value; every other one 404. Every URL asked for is recorded."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            if self.path in hops:
                self.send_response(302)
                self.send_header("Location", hops[self.path])
            else:
                self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = type("P", (ThreadingHTTPServer,), {"daemon_threads": True})(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", seen
    finally:
        server.shutdown()
        server.server_close()


FIRST = "http://mirror.invalid/evil-1.0-py3-none-any.whl"
SECOND = "http://second.invalid/evil-1.0-py3-none-any.whl"


def _own_or_skip() -> str:
    own = [a for a in _non_loopback_own() if ":" not in a]
    if not own:
        pytest.skip("this host has no non-loopback IPv4 address")
    return own[0]


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.1:9/admin/evil-1.0-py3-none-any.whl",
        "http://localhost:9/admin/evil-1.0-py3-none-any.whl",
        "http://169.254.169.254/latest/meta-data/evil-1.0-py3-none-any.whl",
        "http://[::1]:9/admin/evil-1.0-py3-none-any.whl",
        "http://2130706433:9/admin/evil-1.0-py3-none-any.whl",
        "OWN",
        "file:///etc/shadow",
    ],
    ids=["loopback", "localhost", "metadata", "v6-loopback", "decimal", "own-address", "file"],
)
@pytest.mark.parametrize("chain", ["one-hop", "two-hops"])
def test_a_redirect_to_this_host_is_refused_at_the_hop(
    tmp_path: Path, target: str, chain: str
) -> None:
    """The lock's URL is allowed (a name of no address here); its server answers 302 (after
    one allowed hop, or at once) to this host or its metadata service: that request is never
    sent. Control: with --allow-local-urls the same chain is followed to the target."""
    if target == "OWN":
        target = f"http://{_own_or_skip()}:9/admin/evil-1.0-py3-none-any.whl"
    hops = {FIRST: SECOND, SECOND: target} if chain == "two-hops" else {FIRST: target}
    with _redirecting_proxy(hops) as (proxy, seen):
        lock = write_lock(tmp_path / "uv.lock", FIRST, honest())
        env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
        env.update(HTTP_PROXY=proxy, NO_COLOR="1")
        done = _static(lock, tmp_path, env=env)
        assert FIRST in seen, (seen, done.stdout + done.stderr)  # the allowed hop was taken
        assert set(seen) <= {FIRST, SECOND}, seen  # nothing past the allowed hops was asked
        assert done.returncode != 0 and "Traceback" not in done.stderr
        assert "refused (a redirect is judged as the first URL is)" in done.stdout + done.stderr
        if target.startswith("file:"):
            return  # httpx follows no file: URL whatever the rule: no control
        allowed = _static(lock, tmp_path, "--allow-local-urls", env=env)
        assert set(seen) - {FIRST, SECOND}, (seen, allowed.stdout + allowed.stderr)


def test_metadata_addresses_stay_refused_whatever_the_interfaces() -> None:
    """The rule does not depend on the kernel tables alone: loopback and link-local are
    refused when /proc/net cannot be read (own_addresses then falls back to the host name)."""
    empty = own_addresses(Path("/nonexistent"))
    assert all(isinstance(a, ipaddress.IPv4Address | ipaddress.IPv6Address) for a in empty)
    assert "link-local" in (local_target("http://169.254.169.254/x", empty) or "")
    assert "loopback" in (local_target("http://127.0.0.1/x", empty) or "")
