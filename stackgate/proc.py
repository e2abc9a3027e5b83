"""The one runner for external programs (uv, git, buildah, nvidia-smi, servers...).

argv lists only, never a shell; the program is resolved with shutil.which first; both pipes
are read at once; a non-zero exit raises CommandFailed with the captured output.

What the caller's environment may not choose (stackgate often runs as root): a program is
looked up only in absolute PATH entries (an empty or relative entry means the working folder,
whose files anyone who can write there chose), never in a folder every user may write; and a
child never inherits the dynamic loader's injection variables (UNSAFE_CHILD_VARS). Every
process stackgate starts, through `run` or its own Popen, takes its environment from
`child_env` and its program from `find`/`which`.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import stat
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


# Loader variables that make every dynamically linked child run code the variable names.
UNSAFE_CHILD_VARS = ("LD_PRELOAD", "LD_AUDIT", "LD_PROFILE", "LD_DEBUG_OUTPUT")


def _trusted_dir(entry: str) -> bool:
    if not entry or not Path(entry).is_absolute():
        return False
    try:
        info = Path(entry).stat()
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and not info.st_mode & stat.S_IWOTH


def search_path(path: str | None = None) -> str:
    """PATH (`path`, else the process's) without empty, relative, missing or world-writable
    entries: the folders a program may be found in."""
    raw = os.environ.get("PATH", os.defpath) if path is None else path
    return os.pathsep.join(e for e in raw.split(os.pathsep) if _trusted_dir(e))


def find(program: str, *, path: str | None = None) -> str | None:
    """`program` in the trusted entries of PATH (search_path), or None. A name with a slash
    is taken as given when it is absolute, refused (None) when relative."""
    if "/" in program:
        return program if Path(program).is_absolute() and os.access(program, os.X_OK) else None
    return shutil.which(program, path=search_path(path))


def which(program: str, *, path: str | None = None, hint: str = "") -> str:
    """Resolve `program` on the trusted entries of PATH or raise ToolNotFound (exit 3)."""
    found = find(program, path=path)
    if found is None:
        raise ToolNotFound(program, hint)
    return found


def child_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a child gets: `env` (else this process's) with PATH cut to its trusted
    entries and the loader's injection variables removed (logged: nothing is dropped
    silently for a user who set one on purpose)."""
    out = dict(os.environ if env is None else env)
    for name in UNSAFE_CHILD_VARS:
        if out.pop(name, None) is not None:
            log.debug("%s is not passed to child processes", name)
    if "PATH" in out:
        out["PATH"] = search_path(out["PATH"])
    return out


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
        args[0] = which(program, path=env.get("PATH") if env is not None else None)
    log.debug("+ %s", shlex.join(args))
    try:
        proc = subprocess.run(
            args,
            env=child_env(env),
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
