"""Waits on a record store another process holds: bounded, said while waiting, and named.

SQLite's busy timeout waits in silence and then fails as "database is locked". Here each
attempt waits only `ATTEMPT_S` inside SQLite; between attempts the wait is said (what is waited
for, how long, the bound), and at the bound the command fails as an environment problem (exit
3) naming the store and the cause.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from stackgate.errors import EnvironmentProblem

T = TypeVar("T")

WAIT_S = 30.0  # the longest a command waits for a store another process holds
ATTEMPT_S = 0.25  # SQLite's busy timeout for one attempt (connect(timeout=...))
SAY_AFTER_S = 1.0  # a wait shorter than this is not worth a line
SAY_EVERY_S = 10.0

_BUSY = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused because another connection holds the database."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in _BUSY
    return "database is locked" in str(exc) or "database table is locked" in str(exc)


def held_elsewhere(target: Path, waited: float, doing: str) -> EnvironmentProblem:
    return EnvironmentProblem(
        f"{target}: the record store is held by another process (an open write transaction) "
        f"for over {waited:.0f} s; gave up {doing}; nothing was written",
        details=[
            "wait for that process to finish (another records import, mark-good or gate?), "
            f"or find it: fuser {target}"
        ],
    )


def retry_busy(
    step: Callable[[], T],
    *,
    target: Path,
    doing: str,
    say: Callable[[str], None],
    wait_s: float = WAIT_S,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """`step()`, tried again while SQLite says the store is busy, for at most `wait_s`:
    after SAY_AFTER_S `say` is told what is waited for, again every SAY_EVERY_S; at the bound
    EnvironmentProblem (exit 3) names the store and the holder's kind."""
    started = clock()
    said: float | None = None
    while True:
        try:
            return step()
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
            waited = clock() - started
            if waited >= wait_s:
                raise held_elsewhere(target, waited, doing) from None
            if waited >= SAY_AFTER_S and (said is None or waited - said >= SAY_EVERY_S):
                say(
                    f"waiting for the record store {target} ({doing}): another process holds "
                    f"it; {waited:.0f} s of at most {wait_s:.0f} s"
                )
                said = waited
