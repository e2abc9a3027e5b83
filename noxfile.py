"""nox sessions: a thin layer over `python -m builder` / `python -m validators`.

Per-stack sessions are generated from stacks/*.toml: `check-<stack>` and, as each capability
lands, `lock-`, `build-`, `image-`, `validate-`, `gate-`, `reproduce-<stack>`. Plus `tests`
and `lint`. Sessions install the tool from its own lock (uv.lock) with uv.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import nox

nox.needs_version = ">=2024.10.9"
nox.options.default_venv_backend = "uv"
nox.options.sessions = ["tests", "lint"]

ROOT = Path(__file__).parent
PACKAGES = ["stackgate", "builder", "validators", "tests"]
STACKS = sorted(p.stem for p in (ROOT / "stacks").glob("*.toml") if p.name != "rules.toml")
# uv may download the stacks' interpreter for users; CI (.ci/run) sets UV_PYTHON_DOWNLOADS=never.

# (session prefix, package, command, what it does to STACK) -- one line per capability; the
# last column is the session's description in `nox -l`.
PER_STACK: list[tuple[str, str, str, str]] = [
    ("check", "builder", "check", "validate {s}'s manifest and rules, before any download"),
    ("lock", "builder", "lock", "resolve {s} with uv into stacks/locks/{s}/"),
    ("build", "builder", "build", "build {s}'s locked env and select it as envs/{s}/current"),
    ("image", "builder", "image", "build {s}'s container image (docker, buildah or podman)"),
    (
        "gate",
        "validators",
        "gate",
        "gate {s} as the CANDIDATE against its baseline (posargs: --env, --baseline, --run)",
    ),
    ("reproduce", "validators", "reproduce", "rebuild {s}'s known-good record here and compare"),
    ("validate", "validators", "run", "run the validators on envs/{s}/current (host..serve-bench)"),
    (
        "serve-bench",
        "validators",
        "serve-bench",
        "serve and benchmark {s} (posargs: --profile NAME, --reference FILE ...)",
    ),
]


def _install(session: nox.Session, *, dev: bool = False) -> None:
    """Install the tool exactly as locked into the session's venv, bytecode compiled.

    uv writes no .pyc by default, and where PYTHONDONTWRITEBYTECODE is set (this project's
    machines set it) Python never writes one either: every CLI start, and every one of the
    suite's thousands of `python -m ...` children, compiled pydantic, rich, packaging and our
    own packages from source again (0.58 s of CPU per `check` against 0.30 s compiled,
    benchmarks/results/startup.md)."""
    args = ["uv", "sync", "--frozen", "--inexact", "--compile-bytecode"]
    args += ["--group", "dev"] if dev else ["--no-dev"]
    session.run_install(
        *args,
        env={"UV_PROJECT_ENVIRONMENT": session.virtualenv.location},
        silent=True,
    )
    # The checkout's own packages are imported from source (editable): compile them too.
    session.run_install("python", "-m", "compileall", "-q", "-j", "0", *PACKAGES, silent=True)


def _per_stack(prefix: str, package: str, command: str, what: str, stack: str) -> None:
    def _session(session: nox.Session) -> None:
        _install(session)
        session.run("python", "-m", package, command, stack, *session.posargs)

    _session.__doc__ = f"{what.format(s=stack)} (python -m {package} {command} {stack})"
    nox.session(name=f"{prefix}-{stack}", default=False)(_session)


for _prefix, _package, _command, _what in PER_STACK:
    for _stack in STACKS:
        _per_stack(_prefix, _package, _command, _what, _stack)


PYTHONS = ["3.11", "3.12", "3.13"]  # requires-python >= 3.11; each one tested
# The matrix checks the tool on each Python: the tests of its code, not of registries, buildah
# or Slurm (those run once, in `tests`, on the default Python).
FAST = ["-m", "not slow and not network and not buildah and not slurm"]
# pytest-xdist: one worker per core; tests sharing a costly session fixture (the buildah store)
# carry an xdist_group and stay on one worker (tests/conftest.py). `-- -n 0` runs serially.
PARALLEL = ["-n", "auto", "--dist", "loadgroup"]


def _pyenv_pythons_on_path(versions: list[str]) -> None:
    """Put pyenv's interpreters for `versions` on PATH: an inactive pyenv version has only a
    shim there, which uv cannot use (UV_PYTHON_DOWNLOADS=never here), so sessions find the real
    `python3.X` instead. Where pyenv is absent, uv finds (or downloads) the interpreters itself."""
    import shutil
    import subprocess

    pyenv = shutil.which("pyenv")
    if pyenv is None:
        return
    dirs = []
    for version in versions:
        done = subprocess.run([pyenv, "prefix", version], capture_output=True, text=True)
        if done.returncode == 0 and (Path(done.stdout.strip()) / "bin").is_dir():
            dirs.append(str(Path(done.stdout.strip()) / "bin"))
    os.environ["PATH"] = os.pathsep.join([*dirs, os.environ.get("PATH", "")])


_pyenv_pythons_on_path(PYTHONS)


def _alone_in(posargs: Sequence[str]) -> str | None:
    """The value of an `--alone` among the user's arguments (`--alone=X`, `--alone X`)."""
    for i, arg in enumerate(posargs):
        if arg.startswith("--alone="):
            return arg.split("=", 1)[1]
        if arg == "--alone":
            return posargs[i + 1] if i + 1 < len(posargs) else ""
    return None


def suite_phases(posargs: Sequence[str]) -> list[tuple[list[str], list[int]]]:
    """The pytest runs of `nox -s tests`: (arguments after `pytest`, accepted exit codes).

    Everything not marked `alone` in parallel, then the `alone` tests one at a time. Each
    phase's `--alone` (and the second phase's `-n 0`) comes AFTER the user's arguments, since
    pytest takes an option's last value: `-- --alone=only` used to turn the parallel phase into
    the `alone` tests side by side, `-- -n 2` the alone phase into a parallel one. A user's
    `--alone=exclude` / `--alone=only` picks that phase alone; `--alone=include` (the `alone`
    tests beside the others) is refused: that is plain pytest, not this session."""
    parallel = ([*PARALLEL, "--durations=15", *posargs, "--alone=exclude"], [0])
    serial = ([*posargs, "-n", "0", "--alone=only"], [0, 5])
    alone = _alone_in(posargs)
    if alone is None:
        return [parallel, serial]
    if alone == "exclude":
        return [parallel]
    if alone == "only":
        return [serial]
    raise ValueError(
        f"--alone={alone}: `nox -s tests` keeps the `alone` tests apart from the others; pass "
        "--alone=exclude or --alone=only to run one of its two phases, or run pytest itself"
    )


@nox.session
def tests(session: nox.Session) -> None:
    """The whole test suite in parallel; under CI=true a skip not in tests/allowed_skips.py fails.

    Tests marked `alone` compare measured rates (a 5% slower server must be refused): a test
    running beside them on the other core turns their noise into a false verdict, so they run
    afterwards, one at a time. Exit 5 (none selected, e.g. with -m "not slow") is fine there.
    `-- --alone=exclude` / `-- --alone=only` runs one phase (suite_phases)."""
    try:
        phases = suite_phases(session.posargs)
    except ValueError as exc:
        session.error(str(exc))  # before anything is installed
    _install(session, dev=True)
    for args, codes in phases:
        session.run("pytest", *args, success_codes=codes)


@nox.session(name="tests-fast", python=PYTHONS)
def tests_fast(session: nox.Session) -> None:
    """The fast subset (no slow/network/buildah/slurm tests) on each Python (3.11, 3.12, 3.13)."""
    _install(session, dev=True)
    session.run("pytest", *PARALLEL, *FAST, *session.posargs)


@nox.session(name="tests-lowest")
def tests_lowest(session: nox.Session) -> None:
    """The fast subset with every direct dependency at its lowest allowed version."""
    session.run_install(
        "uv",
        "pip",
        "install",
        "--resolution",
        "lowest-direct",
        "--compile-bytecode",
        "-e",
        ".",
        "--group",
        "dev",
        env={"VIRTUAL_ENV": session.virtualenv.location},
        silent=True,
    )
    session.run("pytest", *PARALLEL, *FAST, *session.posargs)


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
