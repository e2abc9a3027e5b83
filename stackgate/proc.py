"""The one runner for external programs (uv, git, buildah, nvidia-smi, servers...).

argv lists only, never a shell; the program is resolved with shutil.which first; both pipes
are read at once; a non-zero exit raises CommandFailed with the captured output.
"""

from __future__ import annotations

import logging
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from stackgate.errors import CommandFailed, EnvironmentProblem, ToolNotFound

log = logging.getLogger("stackgate.proc")


@dataclass(frozen=True)
class Completed:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str


def which(program: str, *, path: str | None = None, hint: str = "") -> str:
    """Resolve `program` on PATH or raise ToolNotFound (exit 3)."""
    found = shutil.which(program, path=path)
    if found is None:
        raise ToolNotFound(program, hint)
    return found


def run(
    argv: Sequence[str | Path],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    check: bool = True,
    timeout: float | None = None,
    input_text: str | None = None,
) -> Completed:
    """Run argv (program resolved on PATH), capture stdout and stderr, raise on failure."""
    args = [str(a) for a in argv]
    program = args[0]
    if "/" not in program:
        search_path = env.get("PATH") if env is not None else None
        args[0] = which(program, path=search_path)
    log.debug("+ %s", shlex.join(args))
    try:
        proc = subprocess.run(
            args,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input_text,
            check=False,
        )
    except FileNotFoundError as exc:
        raise ToolNotFound(program) from exc
    except subprocess.TimeoutExpired as exc:
        raise EnvironmentProblem(
            f"command timed out after {timeout} s: {shlex.join(args)}"
        ) from exc
    done = Completed(args, proc.returncode, proc.stdout, proc.stderr)
    if check and proc.returncode != 0:
        raise CommandFailed(args, proc.returncode, proc.stdout, proc.stderr)
    return done
