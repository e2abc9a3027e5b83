"""Every numeric flag of every command is bounded where it is parsed (issue 23 §5).

The class, not the examples: `records list --limit <24 digits>` (OverflowError),
`wheelhouse --workers 0` (ValueError after `--to` was created), `serve-bench --port 99999`
accepted by --dry-run. This walks the real parsers of both CLIs (every command module, every
subcommand) and fails on any flag still typed plain `int` or `float`; then feeds a few
out-of-range values to real commands.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from stackgate.cli import build_parser, discover
from tests.helpers.cli_walk import walk_actions

ROOT = Path(__file__).resolve().parents[2]
# Floats the command checks itself (stackgate.bounded_http.Limits: positive and finite, exit 2
# naming the field; tests/validators/test_lockcheck_hostile.py refuses 0, -1, nan, inf).
CHECKED_BY_THE_COMMAND = {"validators static: --deadline", "validators static: --request-timeout"}


@pytest.mark.parametrize("package", ["builder", "validators"])
def test_no_numeric_flag_is_plain_int_or_float(package: str) -> None:
    commands = discover(package)
    assert commands
    plain = []
    for entry in commands:
        parser = build_parser(package, commands, "", chosen=entry.name)
        for path, action in walk_actions(parser, package):
            name = f"{path}: {'/'.join(action.option_strings) or action.dest}"
            if action.type in (int, float) and name not in CHECKED_BY_THE_COMMAND:
                plain.append(name)
    assert not plain, "bound these with stackgate.cli_numbers: " + ", ".join(plain)


@pytest.mark.parametrize(
    "argv",
    [
        ["builder", "wheelhouse", "cu128", "--to", "{tmp}/wh", "--workers", "0"],
        ["validators", "records", "list", "--limit", "100000000000000000000000"],
        ["validators", "gate", "cu128", "--tolerance", "nan"],
        ["validators", "gate", "cu128", "--confidence", "1"],
        ["validators", "static", "cu128", "--lock", "x.lock", "--jobs", "0"],
        ["validators", "fleet", "submit", "cu128", "--wheelhouse", "w", "--nodes", "a",
         "--jobs-root", "{tmp}/jobs", "--runs", "0", "--dry-run"],
    ],
)
def test_out_of_range_values_are_exit_2_and_touch_nothing(tmp_path: Path, argv: list[str]) -> None:
    words = [w.replace("{tmp}", str(tmp_path)) for w in argv]
    done = subprocess.run([sys.executable, "-m", *words], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "is outside" in done.stderr and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


# What an outsider types into every numeric flag. Each is refused by the flag's parser (an
# argparse usage error: exit 2 naming the flag, before the command runs) or read as a finite
# number no larger than a command can use.
HOSTILE_NUMBERS = ["-1", "1e23", "100000000000000000000000", "nan", "inf", "-inf", "1e400",
                   "", " ", "0x10", "1_0", "\u0663", "\uff11", "5\x00", "1,5", "--1"]


@pytest.mark.parametrize("package", ["builder", "validators"])
def test_every_numeric_flag_refuses_every_hostile_value(package: str) -> None:
    """The parser walk, dynamic: every bounded flag of every command, every value above.
    (`-1` is refused by every flag: no count, size or time here may be negative.)"""
    commands = discover(package)
    accepted = []
    walked = 0
    for entry in commands:
        parser = build_parser(package, commands, "", chosen=entry.name)
        for path, action in walk_actions(parser, package):
            kind = getattr(action.type, "__name__", "")
            if kind not in ("whole number", "number"):
                continue
            walked += 1
            for text in HOSTILE_NUMBERS:
                try:
                    value = action.type(text)  # type: ignore[misc]
                except argparse.ArgumentTypeError:
                    continue
                accepted.append(f"{path} {'/'.join(action.option_strings)} {text!r} -> {value!r}")
    assert walked >= (3 if package == "builder" else 30)
    assert not accepted, accepted
