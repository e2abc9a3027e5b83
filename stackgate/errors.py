"""One error hierarchy; each kind carries the exit code of the CLI contract, the verdict
word the CLI's last line starts with, an id scripts match on (never the prose) and a hint.

0 ok, 1 a check failed or a regression, 2 bad input, 3 environment problem.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_ENVIRONMENT = 3
EXIT_INTERRUPTED = 130

# What each exit code means, as the verdict line of a command that ended on an error says it.
MEANING = {
    EXIT_OK: "ok",
    EXIT_CHECK_FAILED: "a check failed",
    EXIT_BAD_INPUT: "bad input, nothing was changed",
    EXIT_ENVIRONMENT: "environment problem",
    EXIT_INTERRUPTED: "interrupted",
}


class StackgateError(Exception):
    """Base of every error the CLIs turn into an exit code and a message."""

    exit_code = EXIT_BAD_INPUT
    # The first word of the verdict line the CLI ends with after the message: REFUSED when
    # nothing was done (bad input, a precondition known up front), FAILED when it broke.
    verdict = "REFUSED"
    error_id = "error"  # a raise whose cause scripts would tell apart passes its own
    hint = "run it again with --debug for the traceback"

    def __init__(
        self, message: str, *, details: Sequence[str] = (), error_id: str = "", hint: str = ""
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details = list(details)
        self.error_id = error_id or self.error_id
        self.hint = hint or self.hint

    def lines(self) -> list[str]:
        return [self.message, *self.details]


class CheckFailed(StackgateError):
    """A check, rule or gate said no (exit 1)."""

    exit_code = EXIT_CHECK_FAILED
    verdict = "FAILED"
    error_id = "check-failed"
    hint = "the lines above say what said no; fix the stack or the environment and run it again"


class BadInput(StackgateError):
    """A manifest, lock, argument or file the user gave is wrong (exit 2)."""

    exit_code = EXIT_BAD_INPUT
    error_id = "bad-input"
    hint = "correct the input the message names and run it again; nothing was changed"


class Problem(NamedTuple):
    """One thing wrong in a file: its dotted field ("" for the whole file); str() renders it."""

    file: str
    field: str
    message: str

    def __str__(self) -> str:
        return ": ".join(part for part in self if part)


class ManifestError(BadInput):
    """Every problem found in one manifest, reported together, each once."""

    error_id = "manifest-invalid"
    hint = "fix each problem listed (file: field: what is wrong), then run `stackgate check`"

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = list(dict.fromkeys(problems))
        count = len(self.problems)
        super().__init__(
            f"{count} problem{'s' if count != 1 else ''} in the manifest",
            details=[str(p) for p in self.problems],
        )


class EnvironmentProblem(StackgateError):
    """The host lacks something: a tool, an interpreter, an index, disk (exit 3)."""

    exit_code = EXIT_ENVIRONMENT
    verdict = "FAILED"
    error_id = "env-problem"
    hint = "install or repair what the message names on this host, then run it again"


class HostCannot(EnvironmentProblem):
    """Refused before anything ran: this host lacks what the command needs, and that is known
    up front (no GPU for the validators a record needs, too little free disk for a build)."""

    verdict = "REFUSED"
    error_id = "host-cannot"
    hint = "run it on a host that has what the message names"


class ToolNotFound(EnvironmentProblem):
    verdict = "REFUSED"
    error_id = "tool-not-found"
    hint = "install it, or put the folder that holds it on PATH"

    def __init__(self, program: str, hint: str = "") -> None:
        super().__init__(f"{program} not found on PATH", hint=hint)


class CommandFailed(StackgateError):
    """An external command exited non-zero; carries its output for the report."""

    exit_code = EXIT_ENVIRONMENT
    verdict = "FAILED"
    error_id = "command-failed"
    hint = "the lines above are the end of its output; run it by hand to see all of it"

    def __init__(self, argv: Sequence[str], returncode: int, stdout: str, stderr: str) -> None:
        tail = (stderr or stdout).strip().splitlines()[-20:]
        super().__init__(
            f"command failed with exit code {returncode}: {' '.join(argv)}", details=tail
        )
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
