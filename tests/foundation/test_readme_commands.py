"""The README's commands as typed after its set-up (issue 29 item 1).

The README used to say `uv run stackgate check cu130` right after a set-up that leaves uv only
in `.tools/bin/` (bash: exit 127), and wrote every command as `python -m builder ...`, which the
system Python answers with exit 3. Here every command line of the README's code blocks is
taken as typed and:

- `.tools/bin/uv run stackgate ...`: the words go through stackgate's own parser (the command
  exists and takes those arguments), and the ones that need neither a network, a GPU nor a
  10 GB build run for real through uv, exactly as typed, in a project environment of their
  own (UV_PROJECT_ENVIRONMENT: the checkout's `.venv` is the user's, not the test's);
- `.tools/bin/nox -s ...`: every session named exists (`nox -l`);
- `.ci/bootstrap ...`: the set-up and test commands are the ones `.ci/run` and
  `nox -s fresh-machine` run (benchmarks/fresh_machine/fresh_machine.py runs them on a pristine root).

Where the checkout has no `.tools/bin/uv` (a developer's worktree without the bootstrap) the
uv installed beside this Python (stackgate depends on the `uv` package) stands in for it, and
the test says so in its output; CI runs `.ci/bootstrap` first, so there it is the real one.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stackgate.cli import build_parser, discover
from tests.helpers.as_typed import (
    TypedShell,
    command_lines,
    last_line,
    stackgate_words,
    typed_shell,
)

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
UV = ".tools/bin/uv"
NOX = ".tools/bin/nox"
# Commands that run for real here: no network, no GPU, no build (the others are parsed); a gate
# of committed run reports (files, not a stack) against a committed record is offline too.
RUN_FOR_REAL = {("check",), ("show",), ("--help",), ("gate",)}


def _offline(words: list[str]) -> bool:
    if words[0] != "gate":
        return (words[0],) in RUN_FOR_REAL
    return words[1].endswith(".json") and "--env" not in words


def readme_command_lines() -> list[str]:
    """Every command of the README's ```bash and ```console blocks (console: the `$ ` lines),
    comments dropped, continuation lines joined."""
    return command_lines(README)


def test_every_readme_command_starts_with_what_the_set_up_provides() -> None:
    """After `.ci/bootstrap tools` a user has .ci/bootstrap, .tools/bin/uv and .tools/bin/nox;
    `uv`, `nox` or `python -m ...` alone are not on their PATH."""
    commands = readme_command_lines()
    assert len(commands) >= 10, commands
    for command in commands:
        first = shlex.split(command)[0]
        assert first in {".ci/bootstrap", UV, NOX}, command


def test_every_stackgate_command_parses_as_typed() -> None:
    commands = [c for p in ("builder", "validators") for c in discover(p)]
    names = {c.name for c in commands}
    seen = 0
    for command in readme_command_lines():
        words = stackgate_words(command)
        if words is None or words == ["--help"]:
            continue
        assert words[0] in names, command
        parser = build_parser("stackgate", commands, "", words[0])
        try:
            parser.parse_args(words)
        except SystemExit as exc:  # argparse's "error: ..." is on stderr already
            pytest.fail(f"{command}: stackgate's parser refused it (exit {exc.code})")
        seen += 1
    assert seen >= 8


def test_every_nox_session_the_readme_names_exists() -> None:
    nox = ROOT / NOX
    if not nox.is_file():
        nox_bin = shutil.which("nox")
        assert nox_bin is not None or os.environ.get("CI") != "true", "CI runs .ci/bootstrap first"
        if nox_bin is None:
            pytest.skip("no .tools/bin/nox and no nox on PATH (run .ci/bootstrap tools)")
        nox = Path(nox_bin)
    listed = subprocess.run(
        [str(nox), "-l"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=120
    ).stdout
    sessions = set(re.findall(r"^[*-] (\S+)", listed, re.M))
    wanted: set[str] = set()
    for text in re.findall(r"`(\.tools/bin/nox [^`]+)`", README) + readme_command_lines():
        words = text.split("&&")[-1].split()
        if words[0] != NOX or "-s" not in words:
            continue
        for word in words[words.index("-s") + 1 :]:
            if word.startswith("-"):
                break
            wanted.add(word)
    assert {"tests", "lint", "build-cu128"} <= wanted
    assert wanted <= sessions, wanted - sessions


def test_the_set_up_and_test_commands_are_the_ones_ci_and_fresh_machine_run() -> None:
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.fresh_machine import fresh_machine
    finally:
        sys.path.pop(0)
    setup, full, fast = fresh_machine.readme_commands()
    assert setup == ".ci/bootstrap tools"
    assert full in (ROOT / ".ci" / "run").read_text()
    assert fast.startswith(".ci/bootstrap && ")
    bootstrap = [c for c in readme_command_lines() if c.startswith(".ci/bootstrap")]
    assert bootstrap == [setup, full, fast]


@pytest.fixture(scope="module")
def uv_as_typed(tmp_path_factory: pytest.TempPathFactory) -> TypedShell:
    """`.tools/bin/uv` and an environment whose project venv is the test's own."""
    return typed_shell(tmp_path_factory.mktemp("uv-run-venv"))


def test_the_offline_stackgate_commands_run_as_typed(
    uv_as_typed: TypedShell,
) -> None:
    ran = gates = 0
    for command in readme_command_lines():
        words = stackgate_words(command)
        if words is None or not _offline(words):
            continue
        done = uv_as_typed.run(command)
        expected = 2 if "bad.toml" in command else 0  # the example of a malformed manifest
        if words[0] == "gate":  # the README says which: the equal gate passes, mrr15 refuses
            passes = "gate-equal" in command
            verdict = "OK gate PASSED" if passes else "REFUSED: 19 reason(s) above"
            assert last_line(done).startswith(verdict), (command, done.stderr[-2000:])
            assert done.returncode == (0 if passes else 1), command
            gates += 1
            continue
        assert done.returncode == expected, (command, done.stderr[-2000:])
        if words == ["--help"]:
            assert "COMMAND" in done.stdout
        elif words[0] == "show":
            assert '"name": "cu128"' in done.stdout
        elif "bad.toml" not in command:
            assert done.stderr.strip().splitlines()[-1].startswith("OK "), done.stderr[-2000:]
        ran += 1
    assert ran >= 4  # check, show, --help and the bad-manifest example
    assert gates == 2  # the committed example: machine 2's equal and mrr15 gates


def test_the_bad_manifest_example_says_what_the_readme_shows(
    uv_as_typed: TypedShell,
) -> None:
    block = README.split("<!-- bad-manifest-example -->")[1].split("```console")[1].split("```")[0]
    lines = block.strip().splitlines()
    done = uv_as_typed.run(lines[0].removeprefix("$ "))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == lines[1:]
