"""Where a URL from an untrusted file may lead stackgate: not to this host's own services.

`static --lock` on a lock that names no stack fetches every URL the lock holds; a lock made
to point at `http://127.0.0.1:8080/admin/...`, `http://169.254.169.254/latest/meta-data/`
or `file:///etc/shadow` turned the check into a request to loopback admin endpoints or the
cloud metadata service (SSRF). Such URLs are refused unless the user allows them
(`--allow-local-urls`, for a mirror served on this host): loopback, link-local (the metadata
address is one), unspecified and multicast addresses, names that mean this host or a
metadata service, names that resolve to any of those, and file: URLs.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from stackgate.credentials import redact

_LOCAL_NAMES = ("localhost", "metadata", "metadata.google.internal", "instance-data")
# Metadata services at addresses no class above covers: AWS's IPv6 one is a unique-local
# address (fd00:ec2::254), neither loopback nor link-local.
_METADATA_ADDRESSES = (ipaddress.ip_address("fd00:ec2::254"),)


def _bad_address(text: str) -> str | None:
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    for kind, hit in (
        ("a cloud metadata service's address", address in _METADATA_ADDRESSES),
        ("a loopback address", address.is_loopback),
        ("a link-local address (the cloud metadata service is one)", address.is_link_local),
        ("the unspecified address", address.is_unspecified),
        ("a multicast address", address.is_multicast),
    ):
        if hit:
            return f"{address} is {kind}"
    return None


def local_target(url: str) -> str | None:
    """Why `url` leads to this host or its metadata service (None: it does not)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return "not a URL"
    if parts.scheme == "file":
        return "a file: URL reads this host's files"
    if not host:
        return None
    name = host.rstrip(".").lower()
    if name in _LOCAL_NAMES or name.endswith(".localhost"):
        return f"{name} names this host or a metadata service"
    if (why := _bad_address(name)) is not None:
        return why
    try:
        infos = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return None  # cannot resolve: the fetch fails on its own
    for info in infos:
        if (why := _bad_address(str(info[4][0]))) is not None:
            return f"{name} resolves to {why.split(' is ', 1)[0]}, {why.split(' is ', 1)[1]}"
    return None


def refused_urls(urls: Iterable[str], limit: int = 8) -> list[str]:
    """`URL: why` (redacted) for each URL that leads to this host, the first `limit`; hosts
    are resolved once each."""
    out: list[str] = []
    seen: dict[tuple[str, str | None], str | None] = {}
    for url in urls:
        try:
            parts = urlsplit(url)
            key = (parts.scheme, parts.hostname)
        except ValueError:
            key = ("", url)
        if key not in seen:
            seen[key] = local_target(url)
        if (why := seen[key]) is not None:
            out.append(f"{redact(url)}: {why}")
            if len(out) >= limit:
                break
    return out
