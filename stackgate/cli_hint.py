"""The one way hints, errors and help texts write a stackgate command: as the user can type it
here, from the folder they are in.

`.ci/bootstrap tools` writes `.tools/bin/stackgate` (the checkout's locked CLI, runnable from
any folder); where it exists, hints use it (relative in the checkout, absolute elsewhere). A
`stackgate` on PATH (an installed tool, or .tools/bin on PATH) is written `stackgate`. Else the
README's form, `.tools/bin/uv run stackgate` (with `--project CHECKOUT` outside the checkout).
An installed stackgate (`uv tool install .`, a wheel) has no checkout beside its package: its
hints name the script that runs (or `python -m stackgate` with its interpreter) and the uv of
its own environment. Never `python -m builder`, `nox -s lock-X` or a bare `uv` that is not on
PATH: a newcomer after the README's set-up cannot type them.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
SHIM = Path(".tools") / "bin" / "stackgate"


def _as_typed(path: Path) -> str:
    """`path` relative to the current folder when under it, else absolute."""
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except (ValueError, FileNotFoundError):
        return str(path)


def cli_prefix() -> str:
    """How to type `stackgate` here."""
    on_path = _on_users_path("stackgate")
    if not _is_checkout(CHECKOUT):
        return _installed_prefix(on_path)
    shim = CHECKOUT / SHIM
    if _runs_this_checkout(shim):
        same = on_path is not None and Path(on_path).resolve() == shim.resolve()
        return "stackgate" if same else _as_typed(shim)
    if on_path:
        return "stackgate"
    try:
        Path.cwd().resolve().relative_to(CHECKOUT)
        inside = True
    except (ValueError, FileNotFoundError):
        inside = False
    # `uv run` finds the project from the current folder: outside the checkout it is named.
    project = "" if inside else f" --project {shlex.quote(str(CHECKOUT))}"
    return f"{uv_prefix()} run{project} stackgate"


def _on_users_path(name: str) -> str | None:
    """`name` as the user's shell finds it. `uv run` puts its env's bin folder on PATH for its
    child alone: a script found there under `uv run` (stackgate, the uv package's uv) is not
    one the user can type."""
    found = shutil.which(name)
    if found is None or not os.environ.get("UV_RUN_RECURSION_DEPTH"):
        return found
    own_bin = Path(sys.prefix) / "bin"
    try:
        same = Path(found).parent.resolve() == own_bin.resolve()
    except OSError:
        same = False
    return None if same else found


def _is_checkout(folder: Path) -> bool:
    """The package's parent is a checkout (a clone, an editable install), not site-packages."""
    return (folder / "pyproject.toml").is_file() and (folder / "stacks").is_dir()


def _installed_prefix(on_path: str | None) -> str:
    """An installed stackgate: the script that runs this process (`stackgate` where PATH finds
    that one), else this interpreter's `-m stackgate`."""
    script = Path(sys.argv[0]) if sys.argv and Path(sys.argv[0]).name == "stackgate" else None
    if script is not None:
        if on_path is not None and Path(on_path).resolve() == script.resolve():
            return "stackgate"
        return shlex.quote(str(script.absolute()))
    return f"{shlex.quote(sys.executable)} -m stackgate"


def _runs_this_checkout(shim: Path) -> bool:
    """The shim exists and runs this checkout (a .tools shared between checkouts runs the
    one that wrote it)."""
    try:
        return f'--project "{CHECKOUT}"' in shim.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def uv_prefix() -> str:
    """uv as the user can type it here: on PATH, else the checkout's .tools/bin/uv (an
    installed stackgate: the uv its own environment holds, beside its interpreter)."""
    if _on_users_path("uv"):
        return "uv"
    if _is_checkout(CHECKOUT):
        return _as_typed(CHECKOUT / ".tools" / "bin" / "uv")
    return shlex.quote(str(Path(sys.executable).parent / "uv"))


def cli_command(words: str | Sequence[str]) -> str:
    """`words` (a string as typed, or argv words to be quoted) as a command the user can type."""
    text = words if isinstance(words, str) else shlex.join(words)
    return f"{cli_prefix()} {text}".rstrip()


def uv_command(words: str) -> str:
    """A uv command as the user can type it here (uv on PATH, else the checkout's)."""
    return f"{uv_prefix()} {words}"
