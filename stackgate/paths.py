"""Where stacks live and how a STACK argument (a name or a path) becomes a manifest file."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from stackgate.errors import BadInput
from stackgate.settings import folder

NON_MANIFEST_FILES = frozenset({"rules.toml"})


def _is_checkout(folder: Path) -> bool:
    return (folder / "stacks" / "rules.toml").is_file()


def project_root() -> Path:
    """The checkout holding stacks/: env STACKGATE_ROOT wins, then the package's parent (a
    checkout or an editable install), then the nearest checkout at or above the cwd (stackgate
    installed as a tool, `uv tool install .`, run from inside a checkout).

    No checkout found: BadInput naming what needs one. Falling back to the package's parent
    put an installed tool's envs/, records store and schemas inside its site-packages."""
    found = checkout_root()
    if found is None:
        raise BadInput(
            "no stackgate checkout here: the shipped stacks/, records/, envs/ and the records "
            "store (.state/) live in one; run inside a checkout or set STACKGATE_ROOT to one"
        )
    return found


def checkout_root() -> Path | None:
    """project_root()'s answer, None where no checkout is found."""
    override = folder("STACKGATE_ROOT", "the checkout (stacks/, records/, .state/)")
    if override is not None:
        return override.resolve()
    package_parent = Path(__file__).resolve().parent.parent
    if _is_checkout(package_parent):
        return package_parent
    cwd = working_dir()
    if cwd is None:
        return None
    return next((d for d in (cwd, *cwd.parents) if _is_checkout(d)), None)


def working_dir() -> Path | None:
    """The cwd, resolved; None when its folder was removed after this process started (a
    child inherits its parent's cwd: a gate's runs outlive a checkout replaced under them)."""
    try:
        return Path.cwd().resolve()
    except FileNotFoundError:
        return None


def stacks_dir() -> Path:
    override = folder("STACKGATE_STACKS_DIR", "stack manifests")
    return override.resolve() if override is not None else project_root() / "stacks"


def stack_names(directory: Path | None = None) -> list[str]:
    """Names of the manifests in stacks/ (every *.toml but the rules file)."""
    folder = directory or stacks_dir()
    return sorted(p.stem for p in folder.glob("*.toml") if p.name not in NON_MANIFEST_FILES)


def resolve_stack(stack: str) -> Path:
    """A path to an existing .toml, or a name in stacks/; otherwise BadInput with a hint."""
    candidate = Path(stack)
    if candidate.suffix == ".toml" or os.sep in stack:
        if candidate.is_file():
            return candidate
        raise BadInput(f"{stack}: no such manifest file")
    named = stacks_dir() / f"{stack}.toml"
    if named.is_file():
        return named
    folder = stacks_dir()
    if not folder.is_dir():
        # Outside a checkout (stackgate installed as a tool, run from elsewhere) there is no
        # stacks/ folder: "known stacks: " with nothing after it told the user nothing.
        raise BadInput(
            f"unknown stack '{stack}': no stacks/ folder at {folder}; run from the checkout, "
            "set STACKGATE_ROOT to it, or give a manifest's path"
        )
    names = stack_names()
    if not names:
        raise BadInput(f"unknown stack '{stack}': {folder} holds no stack manifest (*.toml)")
    close = difflib.get_close_matches(stack, names, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else f"; known stacks: {', '.join(names)}"
    raise BadInput(f"unknown stack '{stack}'{hint}")


def display_path(path: Path) -> str:
    """A path as the user would write it: relative to the cwd when it lies below it."""
    cwd = working_dir()
    if cwd is None:  # a relative path cannot be resolved now: shown as given
        return str(path)
    try:
        return str(path.resolve().relative_to(cwd))
    except ValueError:
        return str(path)
