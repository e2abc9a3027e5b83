"""What time means for records: the store's chain orders them, wall time only labels them.

A record's `created_at` is its host's clock, and clocks are wrong (fast, slow, booted in 1970):
- Order: a stack's newest record is the last one the hash chain took in, never the largest
  date (store.RecordStore.latest).
- Reading never judges time: a stored record dated ahead of this host is not tampering;
  `records verify` notes it.
- Files carry only their dates: a record file (import, committed `records/`, `--baseline FILE`)
  dated more than MAX_SKEW ahead of this host is refused (exit 2) naming both times, since
  committed files not in the store are compared by date.
- Making a record checks this host's clock (`own_clock`): before EARLIEST or behind the runs it
  seals by more than MAX_SKEW is an error (exit 3, nothing written); behind the store's newest
  record by more than MAX_SKEW is a warning (which host is wrong cannot be told), and the chain
  orders the record after it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from stackgate.errors import EnvironmentProblem

MAX_SKEW = timedelta(days=1)
EARLIEST = datetime(2024, 1, 1, tzinfo=UTC)  # no stackgate record was made before this


def now_utc() -> datetime:
    return datetime.now(UTC)


def parse(stamp: str) -> datetime | None:
    try:
        value = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return value if value.tzinfo is not None else None


def _span(delta: timedelta) -> str:
    seconds = abs(delta.total_seconds())
    if seconds >= 86_400:
        return f"{seconds / 86_400:.1f} days"
    if seconds >= 3_600:
        return f"{seconds / 3_600:.1f} hours"
    return f"{seconds / 60:.0f} minutes"


def ahead_of_clock(stamp: str, now: datetime | None = None) -> str | None:
    """Why `stamp` cannot be a time that has passed on this host (None when it can)."""
    when = parse(stamp)
    clock = now or now_utc()
    if when is None or when <= clock + MAX_SKEW:
        return None
    return (
        f"dated {stamp}, {_span(when - clock)} ahead of this host's clock "
        f"({clock.isoformat(timespec='seconds')}): this host's clock or the clock of the host "
        "that made it is wrong"
    )


def own_clock(
    made_from: Iterable[tuple[str, str]], store_newest: str | None, now: datetime | None = None
) -> list[str]:
    """Check this host's clock before it dates a record; warnings to print.

    made_from: (what, ISO time) this host wrote for the runs being sealed (run reports'
    started_at). Raises EnvironmentProblem (exit 3) for a clock that is plainly wrong.
    """
    clock = now or now_utc()
    shown = clock.isoformat(timespec="seconds")
    fix = "fix the clock (timedatectl, NTP) and run again; nothing was written"
    if clock < EARLIEST:
        raise EnvironmentProblem(f"this host's clock reads {shown}, before 2024: {fix}")
    for what, stamp in made_from:
        when = parse(stamp)
        if when is not None and clock < when - MAX_SKEW:
            raise EnvironmentProblem(
                f"this host's clock reads {shown}, {_span(when - clock)} before {what} "
                f"({stamp}) that this record seals: the clock jumped back; {fix}"
            )
    warnings: list[str] = []
    newest = parse(store_newest) if store_newest else None
    if newest is not None and clock < newest - MAX_SKEW:
        warnings.append(
            f"this host's clock reads {shown}, {_span(newest - clock)} before the newest record "
            f"in the store ({store_newest}): one of the two clocks is wrong. The store orders "
            "records by its chain, so the new record is the newest all the same; check this "
            "host's clock"
        )
    return warnings


def ahead_of_evidence(created_at: str, newest_seen: Iterable[str | None]) -> str | None:
    """A loud warning when a record about to be made is dated more than MAX_SKEW after the
    newest time this host can see elsewhere (the store's chain, the record files committed
    or exported for its stack): this host's clock may be fast. Its file would then be
    skipped (with a warning) by every host with a correct clock until that date."""
    when = parse(created_at)
    seen = [t for t in (parse(s) for s in newest_seen if s) if t is not None]
    if when is None or not seen or when <= max(seen) + MAX_SKEW:
        return None
    newest = max(seen)
    return (
        f"this record is dated {created_at}, {_span(when - newest)} after the newest record "
        f"this host can see ({newest.isoformat(timespec='seconds')}). If this host's clock is "
        "fast, fix it: hosts with a correct clock skip a record file dated ahead of them"
    )


def stamp_time(stamp: str) -> str | None:
    """An export file name's stamp (YYYYMMDDTHHMMSS, UTC) as an ISO time."""
    try:
        return datetime.strptime(stamp, "%Y%m%dT%H%M%S").replace(tzinfo=UTC).isoformat()
    except ValueError:
        return None
