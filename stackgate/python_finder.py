"""Find the interpreter a stack needs: the one finder the builder (lock, build), bisect and
the static checks of a lock (validators static --lock, compat: the host's CPython standing in
for the env's) share.

Order: `--python` (a path, or a version that the next steps look for); then uv, which knows
every place an interpreter lives (`uv python find --system --no-project 3.12`: its managed
installs and the search path, never a virtual environment or this project's own .venv);
where uv cannot answer (no uv, or it stops at a pyenv shim that points nowhere), the system
PATH (`python3.12`), pyenv (`pyenv prefix 3.12`), then an interpreter uv manages, or, where uv
may download (`UV_PYTHON_DOWNLOADS` is not `never`/`manual`: the usual case for users; CI sets
`never`), `uv python install` fetches one.
Each candidate is asked for its version, so a pyenv shim that points nowhere or a wrong minor
is never taken. None: exit 3.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from stackgate import proc
from stackgate.errors import CommandFailed, EnvironmentProblem
from stackgate.heartbeat import Heartbeat
from stackgate.safe_text import for_terminal
from stackgate.uvbin import uv_bin

_PROBE = "import json,sys,platform;print(json.dumps([sys.version_info[:3], sys.executable]))"


@dataclass(frozen=True)
class Interpreter:
    path: Path
    version: str  # full x.y.z
    found_by: str  # "--python", "uv python find", "PATH", "pyenv", "uv", "self"

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])


def _probe(path: Path, found_by: str) -> Interpreter | None:
    try:
        done = proc.run([str(path), "-c", _PROBE], timeout=30)
    except (CommandFailed, EnvironmentProblem, OSError):
        return None
    try:
        version, executable = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    return Interpreter(
        path=Path(executable).resolve(),
        version=".".join(str(v) for v in version),
        found_by=found_by,
    )


def _pyenv_candidate(minor: str) -> Path | None:
    pyenv = proc.find("pyenv")
    if pyenv is None:
        return None
    try:
        done = proc.run([pyenv, "prefix", minor], timeout=30)
    except (CommandFailed, EnvironmentProblem):
        return None
    prefix = Path(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else None
    if prefix is None:
        return None
    for name in (f"python{minor}", "python3", "python"):
        candidate = prefix / "bin" / name
        if candidate.is_file():
            return candidate
    return None


def find_python(minor: str, explicit: str | None = None, *, download: bool = True) -> Interpreter:
    """An interpreter whose version is `minor` (e.g. '3.12'), or EnvironmentProblem (exit 3).
    download=False: never `uv python install` (a check, not a build, is asking)."""
    tried: list[str] = []
    if explicit is not None and ("/" in explicit or Path(explicit).is_file()):
        found = _probe(Path(explicit), "--python")
        if found is None:
            raise EnvironmentProblem(f"--python {explicit}: not a working Python interpreter")
        if found.minor != minor:
            raise EnvironmentProblem(
                f"--python {explicit} is Python {found.version}; the stack needs {minor}"
            )
        return found
    wanted = explicit or minor
    if not wanted.startswith(minor):
        raise EnvironmentProblem(f"--python {explicit}: the stack needs Python {minor}")
    found, why = _uv_first(wanted)
    if found is not None:
        return found
    tried.append(why)
    on_path = proc.find(f"python{minor}")
    if on_path is not None:
        found = _probe(Path(on_path), "PATH")
        if found is not None and found.version.startswith(wanted):
            return found
        tried.append(f"PATH python{minor} ({'not working' if found is None else found.version})")
    else:
        tried.append(f"no python{minor} on PATH")
    pyenv_path = _pyenv_candidate(wanted)
    if pyenv_path is not None:
        found = _probe(pyenv_path, "pyenv")
        if found is not None and found.version.startswith(wanted):
            return found
    tried.append(f"pyenv prefix {wanted}: not installed" if proc.find("pyenv") else "no pyenv")
    found, why = _from_uv(wanted, download and downloads_allowed())
    if found is not None:
        return found
    tried.append(why)
    may = (
        ""
        if download and downloads_allowed()
        else " (uv may not download one: UV_PYTHON_DOWNLOADS="
        + (os.environ.get("UV_PYTHON_DOWNLOADS", "") + ")")
    )
    raise EnvironmentProblem(
        f"no Python {wanted} interpreter found{may}; install it (e.g. `uv python install "
        f"{minor}` or `pyenv install {minor}`) or pass --python /path/to/python{minor}",
        details=tried,
    )


def find_host_python(minor: str) -> Interpreter | None:
    """This interpreter when it is `minor`, else find_python's without a download; None when
    the host has none (the caller says what it cannot check without one)."""
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == minor:
        return Interpreter(
            Path(sys.executable).resolve(), ".".join(map(str, sys.version_info[:3])), "self"
        )
    try:
        return find_python(minor, download=False)
    except EnvironmentProblem:
        return None


def _uv_first(wanted: str) -> tuple[Interpreter | None, str]:
    """What uv finds first, outside any virtual environment or project."""
    try:
        uv = uv_bin()
    except EnvironmentProblem as exc:
        return None, f"uv: {exc.message}; {exc.hint}"
    found = _uv_find([uv, "python", "find", "--system", "--no-project", wanted], "uv python find")
    return found, "" if found is not None else f"uv python find {wanted}: none it could run"


def downloads_allowed() -> bool:
    """Whether uv may fetch an interpreter on its own (its default is `automatic`)."""
    return os.environ.get("UV_PYTHON_DOWNLOADS", "automatic").strip().lower() not in {
        "never",
        "manual",
    }


def _from_uv(wanted: str, may_download: bool) -> tuple[Interpreter | None, str]:
    """An interpreter uv manages already, or (where allowed) one `uv python install` fetches."""
    try:
        uv = uv_bin()
    except EnvironmentProblem as exc:
        return None, f"uv: {exc.message}; {exc.hint}"
    find = [uv, "python", "find", "--managed-python", wanted]
    found = _uv_find(find, "uv")
    if found is not None:
        return found, ""
    why = f"uv python find --managed-python {wanted}: none"
    if not may_download:
        return None, why
    # A download (or its failure, after DNS retries where the host is unreachable) can take
    # long: say what runs, and keep saying it while it runs.
    say = _say_stderr
    say(f"no Python {wanted} on PATH, in pyenv or among uv's: uv python install {wanted} ...")
    still = Heartbeat(say, lambda s: f"  ... uv python install {wanted} still running ({s:.0f} s)")
    try:
        with still:
            proc.run([uv, "python", "install", wanted], timeout=900)
    except (CommandFailed, EnvironmentProblem) as exc:
        last = (exc.details[-1:] if exc.details else [exc.message])[0]
        return None, f"{why}; uv python install {wanted}: {last}"
    found = _uv_find(find, "uv")
    if found is not None and found.version.startswith(wanted):
        return found, ""
    return None, why


def _say_stderr(line: str) -> None:
    sys.stderr.write(for_terminal(line) + "\n")
    sys.stderr.flush()


def _uv_find(argv: list[str], found_by: str) -> Interpreter | None:
    try:
        done = proc.run(argv, timeout=60)
    except (CommandFailed, EnvironmentProblem):
        return None
    lines = done.stdout.strip().splitlines()
    found = _probe(Path(lines[-1]), found_by) if lines else None
    return found if found is not None and found.version.startswith(argv[-1]) else None
