"""The bounds of a run's HTTP requests (stackgate.bounded_http) and their two CLI flags.

Apart from bounded_http so that a command that only takes the flags (`validators static`,
whose `--env` mode never fetches) does not import httpx to build its parser.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

from stackgate.cli_numbers import float_in

KIB = 1 << 10
MIB = 1 << 20


@dataclass(frozen=True)
class Limits:
    request_s: float = 60.0  # base time of one request
    min_rate: float = 128 * KIB  # bytes/s a request may take on top of request_s
    total_s: float = 1800.0  # every request of one run together
    connect_s: float = 15.0
    # Refuse every request, each redirect hop included, that leads to this host or its
    # metadata service (stackgate.url_targets): on when an untrusted file chose the URLs.
    refuse_local_targets: bool = False

    def __post_init__(self) -> None:
        for name in ("request_s", "min_rate", "total_s", "connect_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number, not {value!r}")


def add_limit_arguments(parser: argparse.ArgumentParser, when: str = "") -> None:
    """`--request-timeout` and `--deadline` (`when`: "with --lock: " where they apply only so)."""
    seconds = float_in(0.0, 7 * 86400.0, low_open=True)
    parser.add_argument(
        "--request-timeout",
        type=seconds,
        default=Limits.request_s,
        metavar="SECONDS",
        help=f"{when}time per request, plus the bytes asked for at "
        f"{Limits.min_rate / 1024:g} KiB/s (default {Limits.request_s:g})",
    )
    parser.add_argument(
        "--deadline",
        type=seconds,
        default=Limits.total_s,
        metavar="SECONDS",
        help=f"{when}time for every request together (default {Limits.total_s:g})",
    )


def limits_from(args: argparse.Namespace) -> Limits:
    """The Limits the two flags ask for; ValueError naming the flag when they bound nothing."""
    try:
        return Limits(request_s=args.request_timeout, total_s=args.deadline)
    except ValueError as exc:
        flag = "--deadline" if "total_s" in str(exc) else "--request-timeout"
        raise ValueError(f"{flag}: {exc}") from None
