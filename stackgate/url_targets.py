"""Where a URL from an untrusted file may lead stackgate: not to this host's own services.

`static --lock` on a lock that names no stack fetches every URL the lock holds; a lock made
to point at `http://127.0.0.1:8080/admin/...`, `http://169.254.169.254/latest/meta-data/`
or `file:///etc/shadow` turned the check into a request to loopback admin endpoints or the
cloud metadata service (SSRF). Such URLs are refused unless the user allows them
(`--allow-local-urls`, for a mirror served on this host): loopback, link-local (the metadata
address is one), unspecified and multicast addresses, this host's own addresses on every
interface (a service bound to 0.0.0.0 answers there too), names that mean this host or a
metadata service, names that resolve to any of those, and file: URLs. The same rule judges
every hop of a redirect (`checked_hop`, an httpx request hook): an allowed server answering
302 to a loopback admin endpoint is refused there, before the request is sent.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

import httpx

from stackgate.credentials import redact
from stackgate.host_addresses import IPAddress, own_addresses

_LOCAL_NAMES = ("localhost", "metadata", "metadata.google.internal", "instance-data")
# Metadata services at addresses no class above covers: AWS's IPv6 one is a unique-local
# address (fd00:ec2::254), neither loopback nor link-local.
_METADATA_ADDRESSES = (ipaddress.ip_address("fd00:ec2::254"),)


def _bad_address(text: str, own: frozenset[IPAddress]) -> str | None:
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
        ("an address of this host (its services answer there)", address in own),
    ):
        if hit:
            return f"{address} is {kind}"
    return None


def local_target(url: str, own: frozenset[IPAddress] | None = None) -> str | None:
    """Why `url` leads to this host or its metadata service (None: it does not); `own`:
    this host's addresses (own_addresses(), read here when not given)."""
    own = own_addresses() if own is None else own
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
    if (why := _bad_address(name, own)) is not None:
        return why
    try:
        infos = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return None  # cannot resolve: the fetch fails on its own
    for info in infos:
        if (why := _bad_address(str(info[4][0]), own)) is not None:
            return f"{name} resolves to {why.split(' is ', 1)[0]}, {why.split(' is ', 1)[1]}"
    return None


def refused_urls(urls: Iterable[str], limit: int = 8) -> list[str]:
    """`URL: why` (redacted) for each URL that leads to this host, the first `limit`; hosts
    are resolved once each."""
    out: list[str] = []
    own = own_addresses()
    seen: dict[tuple[str, str | None], str | None] = {}
    for url in urls:
        try:
            parts = urlsplit(url)
            key = (parts.scheme, parts.hostname)
        except ValueError:
            key = ("", url)
        if key not in seen:
            seen[key] = local_target(url, own)
        if (why := seen[key]) is not None:
            out.append(f"{redact(url)}: {why}")
            if len(out) >= limit:
                break
    return out


class RefusedTarget(httpx.RequestError):
    """A request (a redirect hop included) to this host or its metadata service, refused
    before it was sent."""


def checked_hop(request: httpx.Request) -> None:
    """An httpx request hook (it runs for every hop of a redirect): RefusedTarget for a URL
    local_target refuses."""
    url = str(request.url)
    if (why := local_target(url)) is not None:
        raise RefusedTarget(
            f"{redact(url)}: {why}; refused (a redirect is judged as the first URL is)",
            request=request,
        )
