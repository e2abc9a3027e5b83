"""Numeric command-line arguments, bounded where they are parsed.

`type=int` alone took `--limit 100000000000000000000000` (an OverflowError in SQLite),
`--workers 0` (a ValueError from the thread pool, after `--to` was created) and `--tolerance
nan`. Every numeric flag uses one of these instead: a value outside its range is argparse's
usage error (exit 2) naming the flag and the range, before the command does anything.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable

# What a reader of the command line sees is what is parsed: ASCII digits only. Python's int()
# and float() also take other scripts' digits ('٣' is 3) and underscores ('1_0' is 10).
_WHOLE = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def int_in(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number in [low, high]."""

    def parse(text: str) -> int:
        if not _WHOLE.fullmatch(text.strip()):
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
        value = int(text.strip(), 10)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is outside [{low}, {high}]")
        return value

    parse.__name__ = "whole number"
    return parse


def float_in(low: float, high: float, *, low_open: bool = False, high_open: bool = False
             ) -> Callable[[str], float]:  # fmt: skip
    """An argparse type: a finite number in the interval (open ends as asked)."""
    shown = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"

    def parse(text: str) -> float:
        if not _NUMBER.fullmatch(text.strip()):
            if text.strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):
                raise argparse.ArgumentTypeError(f"{text} is outside {shown}")
            raise argparse.ArgumentTypeError(f"{text!r} is not a number")
        value = float(text)
        below = value <= low if low_open else value < low
        above = value >= high if high_open else value > high
        if not math.isfinite(value) or below or above:
            raise argparse.ArgumentTypeError(f"{text} is outside {shown}")
        return value

    parse.__name__ = "number"
    return parse


PORT = int_in(1, 65535)
WORKERS = int_in(1, 64)
RUNS = int_in(1, 1000)  # validation runs / repeats: a record holds at most 1,000 samples
