"""Human output goes to stderr through rich; stdout is kept for --json results."""

from __future__ import annotations

import os

from rich.console import Console


def console_err() -> Console:
    """A stderr console; plain (no colour, no live bars) when not a terminal or under CI."""
    plain = os.environ.get("CI") == "true" or os.environ.get("NO_COLOR") is not None
    return Console(stderr=True, no_color=plain, soft_wrap=True, width=200 if plain else None)
