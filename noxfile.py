"""nox sessions: a thin layer over `python -m builder` / `python -m validators`.

Per-stack sessions are generated from stacks/*.toml: `check-<stack>` and, as each capability
lands, `lock-`, `build-`, `image-`, `validate-`, `gate-`, `reproduce-<stack>`. Plus `tests`
and `lint`. Sessions install the tool from its own lock (uv.lock) with uv.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nox

nox.needs_version = ">=2024.10.9"
nox.options.default_venv_backend = "uv"
nox.options.sessions = ["tests", "lint"]

ROOT = Path(__file__).parent
STACKS = sorted(p.stem for p in (ROOT / "stacks").glob("*.toml") if p.name != "rules.toml")
# uv may download the stacks' interpreter for users; CI (.ci/run) sets UV_PYTHON_DOWNLOADS=never.

# (session prefix, package, command, extra args, default) -- one line per capability.
PER_STACK: list[tuple[str, str, str, list[str]]] = [
    ("check", "builder", "check", []),
    ("lock", "builder", "lock", []),
    ("build", "builder", "build", []),
    ("image", "builder", "image", []),
    ("gate", "validators", "gate", []),
    ("reproduce", "validators", "reproduce", []),
    ("validate", "validators", "run", []),  # --env defaults to envs/<stack>/current
    ("serve-bench", "validators", "serve-bench", []),  # posargs: --profile, --reference ...
]


def _install(session: nox.Session, *, dev: bool = False) -> None:
    """Install the tool exactly as locked into the session's venv."""
    args = ["uv", "sync", "--frozen", "--inexact"]
    args += ["--group", "dev"] if dev else ["--no-dev"]
    session.run_install(
        *args,
        env={"UV_PROJECT_ENVIRONMENT": session.virtualenv.location},
        silent=True,
    )


def _per_stack(prefix: str, package: str, command: str, extra: list[str], stack: str) -> None:
    @nox.session(name=f"{prefix}-{stack}", default=False)
    def _session(session: nox.Session) -> None:
        _install(session)
        session.run("python", "-m", package, command, stack, *extra, *session.posargs)


for _prefix, _package, _command, _extra in PER_STACK:
    for _stack in STACKS:
        _per_stack(_prefix, _package, _command, _extra, _stack)


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite; under CI=true every marker this machine supports must run."""
    _install(session, dev=True)
    session.run("pytest", "--durations=15", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff + mypy --strict."""
    _install(session, dev=True)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", "stackgate", "builder", "validators")
    session.run("mypy")


@nox.session(name="refresh-image-pins", default=False)
def refresh_image_pins(session: nox.Session) -> None:
    """Resolve the tags in images/base-images.toml again (needs skopeo and a registry)."""
    _install(session)
    session.run("python", "-m", "builder", "image-pins", "--refresh", *session.posargs)


@nox.session(name="fresh-machine", python=False, default=False)
def fresh_machine(session: nox.Session) -> None:
    """Run the README's set-up commands verbatim on a pristine Debian 12 root (debootstrap, root)."""
    session.run(sys.executable, "benchmarks/fresh_machine.py", *session.posargs, external=True)
