"""One error hierarchy; each kind carries the exit code of the CLI contract and the verdict
word the CLI's last line starts with.

0 ok, 1 a check failed or a regression, 2 bad input, 3 environment problem.
"""

from __future__ import annotations

from collections.abc import Sequence

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

    def __init__(self, message: str, *, details: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.details = list(details)

    def lines(self) -> list[str]:
        return [self.message, *self.details]


class CheckFailed(StackgateError):
    """A check, rule or gate said no (exit 1)."""

    exit_code = EXIT_CHECK_FAILED
    verdict = "FAILED"


class BadInput(StackgateError):
    """A manifest, lock, argument or file the user gave is wrong (exit 2)."""

    exit_code = EXIT_BAD_INPUT


class ManifestError(BadInput):
    """Every problem found in one manifest, reported together."""

    def __init__(self, problems: Sequence[str]) -> None:
        count = len(problems)
        super().__init__(
            f"{count} problem{'s' if count != 1 else ''} in the manifest",
            details=problems,
        )
        self.problems = list(problems)


class EnvironmentProblem(StackgateError):
    """The host lacks something: a tool, an interpreter, an index, disk (exit 3)."""

    exit_code = EXIT_ENVIRONMENT
    verdict = "FAILED"


class HostCannot(EnvironmentProblem):
    """Refused before anything ran: this host lacks what the command needs, and that is known
    up front (no GPU for the validators a record needs, too little free disk for a build)."""

    verdict = "REFUSED"


class ToolNotFound(EnvironmentProblem):
    verdict = "REFUSED"

    def __init__(self, program: str, hint: str = "") -> None:
        message = f"{program} not found on PATH"
        super().__init__(f"{message}; {hint}" if hint else message)
        self.program = program


class CommandFailed(StackgateError):
    """An external command exited non-zero; carries its output for the report."""

    exit_code = EXIT_ENVIRONMENT
    verdict = "FAILED"

    def __init__(self, argv: Sequence[str], returncode: int, stdout: str, stderr: str) -> None:
        tail = (stderr or stdout).strip().splitlines()[-20:]
        super().__init__(
            f"command failed with exit code {returncode}: {' '.join(argv)}", details=tail
        )
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
