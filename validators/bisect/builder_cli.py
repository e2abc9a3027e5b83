"""The builder as the bisect uses it: its CLI in a child process (`python -m builder lock`,
`python -m builder build --json`), as `validators reproduce` and the fleet's nodes do. The
validators never import builder internals (tests/foundation/test_import_plan.py); the lock a
child wrote is read with stackgate.lock.state, the door both sides share."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ValidationError

from stackgate import proc
from stackgate.build_record import BuildOutput
from stackgate.cli_output import ErrorOutput
from stackgate.errors import (
    EXIT_BAD_INPUT,
    EXIT_ENVIRONMENT,
    BadInput,
    CommandFailed,
    EnvironmentProblem,
)
from stackgate.model import validation_problems


class LockOutput(BaseModel):
    """What the bisect reads of `builder lock --json` (exit 0)."""

    lock_hash: str


@dataclass(frozen=True)
class Refused:
    """A child that exited 2 (bad input: for a lock, uv found no resolution) with its words."""

    words: list[str]


def _run(argv: list[str]) -> tuple[int, str, str]:
    done = proc.run([sys.executable, "-m", "builder", *argv, "--json"], check=False)
    return done.returncode, done.stdout, done.stderr


def _error(code: int, stdout: str, stderr: str, argv: list[str]) -> Refused:
    """Exit 2: the child's message and details; exit 3: EnvironmentProblem with them (an
    index that cannot be reached names the index); anything else: CommandFailed."""
    try:
        error = ErrorOutput.model_validate_json(stdout)
    except ValidationError:
        raise CommandFailed(["builder", *argv], code, stdout, stderr) from None
    if code == EXIT_BAD_INPUT:
        return Refused([error.error, *error.details])
    if code == EXIT_ENVIRONMENT:
        raise EnvironmentProblem(error.error, details=error.details)
    raise CommandFailed(["builder", *argv], code, stdout, stderr)


def lock(manifest: Path, locks_dir: Path, python: Path) -> str | Refused:
    """`builder lock MANIFEST --locks-dir DIR --no-compat`: the new lock's hash (an existing
    uv.lock in the folder is uv's preference), or Refused with uv's words. --no-compat: the
    step is checked by `static --lock` before it is built."""
    argv = ["lock", str(manifest), "--locks-dir", str(locks_dir), "--python", str(python)]
    argv.append("--no-compat")
    code, stdout, stderr = _run(argv)
    if code != 0:
        return _error(code, stdout, stderr, argv)
    try:
        return LockOutput.model_validate_json(stdout).lock_hash
    except ValidationError as exc:
        raise EnvironmentProblem(
            "`builder lock --json` exited 0 without a lock hash",
            details=validation_problems(exc)[:10],
        ) from None


def build(manifest: Path, locks_dir: Path, venv_root: Path, python: Path) -> BuildOutput:
    """`builder build MANIFEST --json`: atomic, content-addressed, reused for the same lock."""
    argv = ["build", str(manifest), "--locks-dir", str(locks_dir)]
    argv += ["--venv-root", str(venv_root), "--python", str(python)]
    code, stdout, stderr = _run(argv)
    if code != 0:
        refused = _error(code, stdout, stderr, argv)
        raise BadInput(refused.words[0], details=refused.words[1:])
    return BuildOutput.from_child(stdout)
