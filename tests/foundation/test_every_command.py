"""Every command of `stackgate --help`, run piped as a newcomer types it on this host (no GPU),
ends with one verdict line (OK / FAILED / REFUSED / INCOMPLETE) and the exit code the README
promises: INCOMPLETE (exit 3) wherever what decides the verdict was skipped, never OK.

The cases (tests/helpers/every_command.py) are the survey's of benchmarks/first_hour/
every_command.py. A tiny real stack (two wheels, a local index) is kept in a folder outside the
checkout: locked, built and judged there, and nothing is written into the checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stackgate.cli import JOURNEY, discover
from tests.helpers.every_command import CASES, ROOT, VERDICT, newcomer_workspace, run_case

BOX = set("│┃━─┏┓┗┛╭╮╰╯┡┩")


def _untracked() -> set[str]:
    done = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all", "stacks"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return set(done.stdout.splitlines())


def test_every_command_has_a_case() -> None:
    commands = {c.name for p in ("builder", "validators") for c in discover(p)}
    covered = {case.argv[0] for case in CASES}
    assert commands <= covered, f"commands without a case: {sorted(commands - covered)}"
    steps = {name for _title, names in JOURNEY for name in names}
    assert commands <= steps, f"commands in no step of --help: {sorted(commands - steps)}"


@pytest.mark.slow
def test_every_command_ends_with_its_verdict(tmp_path: Path) -> None:
    """One run of every case, in order (lock, then build, then the validators on the env):
    the last line is a verdict line with the expected word, the exit code the expected one,
    and nothing is left in the checkout's stacks/."""
    values = newcomer_workspace(tmp_path)
    env = {**os.environ, "STACKGATE_STATE_DIR": str(tmp_path / "state")}
    before = _untracked()
    wrong: list[str] = []
    for case in (c for c in CASES if not c.slow):
        out = run_case(case, [sys.executable, "-m", "stackgate"], values, ROOT, env=env)
        line = f"{case.name}: exit {out.exit_code}, last line {out.last_line[:200]!r}"
        if not VERDICT.match(out.last_line) or not out.last_line.startswith(case.verdict):
            wrong.append(f"{line} (want a line starting {case.verdict})")
        elif out.exit_code != case.exit_code:
            wrong.append(f"{line} (want exit {case.exit_code})")
        elif BOX & set(out.last_line):
            wrong.append(f"{line} (a box-drawn table when piped)")
    assert not wrong, "\n".join(wrong)
    assert _untracked() == before, "the commands left files in the checkout's stacks/"
    assert (Path(values["mine"]).parent / "locks" / "mine" / "uv.lock").is_file(), (
        "the lock is beside its manifest"
    )
