"""httpcore's connection pool with one race closed: the pool never closes a connection that a
request holds.

httpcore (1.0.9 and its master as of this writing, encode/httpcore#1110) hands an idle
connection to a waiting request under the pool's lock, but the connection stays "idle" until
the request's own thread wakes and starts on it. A pass of another thread in between (a request
added, a response closed) still sees it idle and closes it: as expired (keep-alive expiry passed,
or the socket reads as readable), or to make room at `max_connections`. It closes it outside the
lock, so the close can land after the request started: the request then reads a closed socket
("[Errno 9] Bad file descriptor", in the middle of a body as easily as before the status line)
or, when the close lands during a blocked read, waits for its read timeout. Seen with several
threads sharing one client under CPU load (`builder.lock.origin` reads index pages on 8
threads; the wheelhouse shares its client with them).

`assign_requests` is httpcore's assignment pass with the held connections left alone: one a
pending request holds is never closed (not as expired, not as surplus, not to make room); it is
judged again once that request is done with it. Connections not held are preferred when a
request is handed one.
"""

from __future__ import annotations

import httpcore


def assign_requests(pool: httpcore.ConnectionPool) -> list[httpcore.ConnectionInterface]:
    """Hand queued requests connections, removing the closed, expired and surplus idle ones that
    no request holds; return those to close (the caller closes them outside the pool's lock)."""
    held = {id(r.connection) for r in pool._requests if r.connection is not None}
    closing: list[httpcore.ConnectionInterface] = []
    for connection in list(pool._connections):
        if connection.is_closed():
            pool._connections.remove(connection)
        elif id(connection) not in held and connection.has_expired():
            pool._connections.remove(connection)
            closing.append(connection)
    idle = [c for c in pool._connections if c.is_idle() and id(c) not in held]
    for connection in idle[: max(0, len(idle) - pool._max_keepalive_connections)]:
        pool._connections.remove(connection)
        closing.append(connection)
    for request in [r for r in pool._requests if r.is_queued()]:
        origin = request.request.url.origin
        available = sorted(
            (c for c in pool._connections if c.can_handle_request(origin) and c.is_available()),
            key=lambda c: id(c) in held,
        )
        if available:
            request.assign_to_connection(available[0])
        else:
            if len(pool._connections) >= pool._max_connections:
                spare = [c for c in pool._connections if c.is_idle() and id(c) not in held]
                if not spare:
                    continue  # stays queued until a connection is released
                pool._connections.remove(spare[0])
                closing.append(spare[0])
            connection = pool.create_connection(origin)
            pool._connections.append(connection)
            request.assign_to_connection(connection)
        held.add(id(request.connection))
    return closing


class Pool(httpcore.ConnectionPool):
    """httpcore.ConnectionPool whose passes leave held connections alone."""

    def _assign_requests_to_connections(self) -> list[httpcore.ConnectionInterface]:
        return assign_requests(self)


class ProxyPool(httpcore.HTTPProxy):
    """httpcore.HTTPProxy (an http:// forward proxy) whose passes leave held connections
    alone."""

    def _assign_requests_to_connections(self) -> list[httpcore.ConnectionInterface]:
        return assign_requests(self)
