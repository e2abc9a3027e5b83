"""This host's own addresses (every interface's, not only loopback), from the kernel's tables.

A URL at the host's own non-loopback address (`http://192.0.2.2:8080/admin`) reaches a service
bound to 0.0.0.0 as surely as `127.0.0.1` does: the URL rule (stackgate.url_targets) refuses
both. Read from /proc/net/fib_trie (IPv4: the `/32 host LOCAL` entries) and /proc/net/if_inet6
(IPv6); where neither can be read, the addresses this host's name resolves to.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from pathlib import Path

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def parse_fib_trie(text: str) -> set[IPAddress]:
    """The IPv4 addresses /proc/net/fib_trie lists as this host's own (`/32 host LOCAL`)."""
    out: set[IPAddress] = set()
    last: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("|--"):
            last = stripped[3:].strip()
        elif last is not None and stripped.startswith("/32 host LOCAL"):
            with contextlib.suppress(ValueError):
                out.add(ipaddress.ip_address(last))
    return out


def parse_if_inet6(text: str) -> set[IPAddress]:
    """The IPv6 addresses of /proc/net/if_inet6 (32 hex digits first on each line)."""
    out: set[IPAddress] = set()
    for line in text.splitlines():
        word = line.split(" ", 1)[0].strip()
        if len(word) == 32:
            with contextlib.suppress(ValueError):
                out.add(ipaddress.IPv6Address(int(word, 16)))
    return out


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def own_addresses(proc: Path = Path("/proc/net")) -> frozenset[IPAddress]:
    """Every address of this host's interfaces (see the module)."""
    found = parse_fib_trie(_read(proc / "fib_trie")) | parse_if_inet6(_read(proc / "if_inet6"))
    if not found:
        try:
            infos = socket.getaddrinfo(socket.gethostname(), None, proto=socket.IPPROTO_TCP)
        except (OSError, UnicodeError):
            infos = []
        for info in infos:
            with contextlib.suppress(ValueError):
                found.add(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]))
    return frozenset(found)
