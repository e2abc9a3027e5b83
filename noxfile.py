"""nox sessions: a thin layer over `python -m builder` / `python -m validators`.

Per-stack sessions are generated from stacks/*.toml: `check-<stack>` and, as each capability
lands, `lock-`, `build-`, `image-`, `validate-`, `gate-`, `reproduce-<stack>`. Plus `tests`
and `lint`. Sessions install the tool from its own lock (uv.lock) with uv.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import nox
from nox.command import CommandFailed

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
    benchmarks/startup/results/startup.md)."""
    args = ["uv", "sync", "--frozen", "--inexact", "--compile-bytecode"]
    args += ["--group", "dev"] if dev else ["--no-dev"]
    with heartbeat(session, "uv sync: installing the locked dependencies"):
        session.run_install(
            *args,
            env={"UV_PROJECT_ENVIRONMENT": session.virtualenv.location},
            silent=True,
        )
        # The checkout's own packages are imported from source (editable): compile them too.
        session.run_install("python", "-m", "compileall", "-q", "-j", "0", *PACKAGES, silent=True)


@contextmanager
def heartbeat(session: nox.Session, what: str, every_s: float = 15.0) -> Iterator[None]:
    """Say what a long quiet step is doing every `every_s` seconds (a cold `uv sync` took 3
    minutes without a line, issue 29 item 3)."""
    stop = threading.Event()
    start = time.monotonic()

    def beat() -> None:
        while not stop.wait(every_s):
            session.log(f"{what}: still running ({time.monotonic() - start:.0f} s)")

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


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


# What the suite writes, per place (issue 29: 4 of 14 failures on a nearly full disk said only
# "No space left on device"; README cost table): the full suite ~16 GB into the stackgate and
# uv caches on a cold machine plus its builds in the temporary folder; the fast subset ~1 GB.
SUITE_DISK_GB = {
    "full": {"cache": 16.0, "tmp": 4.0, "checkout": 1.0},
    "fast": {"cache": 1.0, "tmp": 1.0, "checkout": 0.5},
}


def _cache_home() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    return Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"


def _du_gb(path: Path) -> float:
    """Size of what is already cached there (it is reused, not written again)."""
    import subprocess

    if not path.is_dir():
        return 0.0
    try:
        done = subprocess.run(
            ["du", "-sxk", str(path)], capture_output=True, text=True, timeout=120
        )
        return int(done.stdout.split()[0]) / 2**20
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        return 0.0


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def disk_shortfalls(
    posargs: Sequence[str],
    places: dict[str, Path],
    cached_gb: float = 0.0,
    free_gb: Callable[[Path], float] = lambda p: shutil.disk_usage(p).free / 2**30,
) -> tuple[float, list[str]]:
    """(GB the suite needs on a cold machine, one line per filesystem with less free space
    than the shares of the places on it; what is already cached counts as written)."""
    share = SUITE_DISK_GB["fast" if any("not slow" in a for a in posargs) else "full"]
    by_device: dict[int, list[tuple[str, Path, float]]] = {}
    for kind, path in places.items():
        gb = max(share[kind] - (cached_gb if kind == "cache" else 0.0), 0.5)
        where = _existing(path)
        by_device.setdefault(where.stat().st_dev, []).append((kind, where, gb))
    short = []
    for entries in by_device.values():
        need = sum(gb for _, _, gb in entries)
        have = free_gb(entries[0][1])
        if have < need:
            names = ", ".join(f"{kind} {where}" for kind, where, _ in entries)
            short.append(f"{have:.1f} GB free on the filesystem of {names}; needs ~{need:.1f} GB")
    return sum(share.values()), short


def _check_disk(session: nox.Session) -> None:
    if os.environ.get("STACKGATE_SKIP_DISK_CHECK") == "1":
        return
    import tempfile

    # stackgate/settings.py cache_root(), without importing stackgate into nox's own venv
    named = os.environ.get("STACKGATE_CACHE") or os.environ.get("STACKGATE_CACHE_DIR")
    cache = Path(named) if named else _cache_home() / "stackgate"
    places = {"cache": cache, "tmp": Path(tempfile.gettempdir()), "checkout": ROOT}
    needed, short = disk_shortfalls(session.posargs, places, cached_gb=_du_gb(cache))
    if short:
        session.error(
            "not enough free disk for the test suite (~"
            f"{needed:.0f} GB on a cold machine): "
            + "; ".join(short)
            + ". Free some (README: reclaiming disk) or set STACKGATE_SKIP_DISK_CHECK=1"
        )
    session.log(f"disk: enough free for the suite (~{needed:.0f} GB on a cold machine)")


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
    _check_disk(session)
    _install(session, dev=True)
    for i, (args, codes) in enumerate(phases):
        try:
            session.run("pytest", *args, success_codes=codes)
        except CommandFailed:
            if i + 1 < len(phases):
                session.warn(
                    "the `alone` phase (tests comparing measured rates, one at a time) did NOT "
                    "run: the parallel phase failed. Run it by itself with "
                    "`nox -s tests -- --alone=only`."
                )
            raise


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
    """ruff + mypy --strict + the product's own text (no tracker references, no dead paths)."""
    _install(session, dev=True)
    session.run("python", ".ci/product_text.py")
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
    session.run(sys.executable, "benchmarks/fresh_machine/fresh_machine.py", *session.posargs, external=True)
