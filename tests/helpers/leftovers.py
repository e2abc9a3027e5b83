"""What a test leaves behind: its processes, and why a child failed.

Processes: each test runs with a marker in its environment (TESTS_PROCESS_MARK=<token>), which
every process it starts inherits -- the CLI child, the server that child launches, and that
server's workers after their parent is gone (reparented to PID 1, out of reach of a process
tree walk). At the test's teardown, pass or fail or pytest-timeout's "Timeout", whatever still
carries the marker is sent SIGTERM, then SIGKILL. Before this a timed-out test left its
`transformers serve` running (370 MB, its port held) 57 minutes later: `subprocess.run(...,
timeout=)` kills only its direct child, and the child never got to tear its server down.
Processes started with a fresh environment (`env -i`) do not carry the marker and are not seen.

Children's stderr: a `CalledProcessError` (or `TimeoutExpired`) shows only the command and its
exit status; the captured stderr that says why (uv's resolver, "No space left on device") is in
the exception, unprinted. `stderr_tail` finds it anywhere in the exception's chain.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path

MARKER = "TESTS_PROCESS_MARK"  # not STACKGATE_*: no product setting


def carrying(token: str, proc: Path = Path("/proc")) -> list[int]:
    """PIDs of live processes (this user's, readable) started with MARKER=token."""
    needle = b"\0" + f"{MARKER}={token}".encode() + b"\0"
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:  # gone, or another user's
            continue
        if state != "Z" and needle in b"\0" + environ + b"\0":
            found.append(int(entry.name))
    return found


def _signal_all(pids: Iterable[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def tear_down(token: str, grace_s: float = 5.0) -> list[int]:
    """SIGTERM to every process carrying the token, SIGKILL to those alive after grace_s.
    Returns the PIDs found. PIDs are read again before SIGKILL, so a PID reused meanwhile by a
    process without the marker is never signalled."""
    first = carrying(token)
    if not first:
        return []
    _signal_all(first, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while (alive := carrying(token)) and time.monotonic() < deadline:
        time.sleep(0.1)
    _signal_all(alive, signal.SIGKILL)
    return first


def stderr_tail(exc: BaseException | None, lines: int = 40) -> str | None:
    """The last lines of the captured stderr (else stdout) of the first exception in exc's
    chain (cause, context) that carries one: CalledProcessError, TimeoutExpired."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        for name in ("stderr", "stdout", "output"):
            text = getattr(exc, name, None)
            if isinstance(text, bytes):
                text = text.decode(errors="replace")
            if isinstance(text, str) and text.strip():
                tail = text.rstrip().splitlines()[-lines:]
                return f"{type(exc).__name__} {name}, last {len(tail)} lines:\n" + "\n".join(tail)
        exc = exc.__cause__ or exc.__context__
    return None
