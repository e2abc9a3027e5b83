"""Write a stack's generated uv project, run `uv lock`, and tell a current lock from a stale one.

Layout: stacks/locks/<stack>/pyproject.toml (generated) and stacks/locks/<stack>/uv.lock.
Staleness: the pyproject's [tool.stackgate].manifest_hash against the manifest's current
hash of LOCK_FIELDS. uv's own errors are turned into ours: an index that cannot be reached is
an environment problem (exit 3) naming the index and its URL; a resolution without solution is
bad input (exit 2: the pins contradict each other).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import tempfile
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from builder.lock.pins import contradictions
from builder.lock.uvproject import (
    IndexSpec,
    index_specs,
    manifest_hash,
    regenerate_command,
    render_pyproject,
)
from stackgate import proc
from stackgate.credentials import has_credentials, redact
from stackgate.errors import BadInput, CommandFailed, EnvironmentProblem
from stackgate.files import read_bytes_bounded, read_text_bounded
from stackgate.layout import LockFiles
from stackgate.loading import LoadedStack
from stackgate.paths import display_path, stacks_dir
from stackgate.python_finder import Interpreter
from stackgate.uvbin import uv_bin
from stackgate.uvlock import MAX_LOCK_BYTES, UvLock, parse_uv_lock

# Words uv (reqwest/hyper) uses when a host cannot be reached, as opposed to "no solution".
_NETWORK_WORDS = re.compile(
    r"dns error|failed to lookup|connection refused|connect error|timed out|"
    r"error sending request|network|tcp connect|unreachable|Could not connect|"
    r"failed to fetch|HTTP status server error|404 Not Found|No such file or directory",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class LockState:
    files: LockFiles
    manifest_hash: str
    lock_hash: str
    index_map: dict[str, str]
    lock: UvLock

    @property
    def short(self) -> str:
        return self.lock_hash[:12]


def uv_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for every uv call: never download interpreters, no stray project env."""
    env = {
        k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT"}
    }
    env["UV_PYTHON_DOWNLOADS"] = "never"
    env.update(extra or {})
    return env


def uv_version() -> str:
    done = proc.run([uv_bin(), "--version"], env=uv_env())
    return done.stdout.strip().removeprefix("uv ").split()[0]


def explain_uv_failure(
    exc: CommandFailed, specs: list[IndexSpec], git_sources: Mapping[str, str]
) -> Exception:
    text = f"{exc.stderr}\n{exc.stdout}"
    for spec in specs:
        host_part = spec.url.rstrip("/")
        if host_part in text and _NETWORK_WORDS.search(text):
            return EnvironmentProblem(
                f"index '{spec.name}' at {spec.url} cannot be reached",
                details=[
                    "remap it to a reachable mirror or a local folder with "
                    f"--index-map {spec.name}=URL",
                    *exc.details[-8:],
                ],
            )
    for package, url in git_sources.items():
        if url in text and ("Git operation failed" in text or "failed to clone" in text):
            return EnvironmentProblem(
                f"git source of package '{package}' at {url} cannot be fetched",
                details=[
                    f"map it to a reachable mirror with --index-map {package}=URL",
                    *exc.details[-6:],
                ],
            )
    if "network was disabled" in text:
        return EnvironmentProblem(
            "uv runs offline (UV_OFFLINE / --offline) and a package is not in its cache",
            details=exc.details[-6:],
        )
    if "No solution found" in text or "unsatisfiable" in text:
        return BadInput("uv found no resolution for the manifest's pins", details=exc.details)
    if _NETWORK_WORDS.search(text):
        return EnvironmentProblem("uv could not reach a package source", details=exc.details)
    return exc


def write_project(loaded: LoadedStack, files: LockFiles, index_map: Mapping[str, str]) -> None:
    files.folder.mkdir(parents=True, exist_ok=True)
    text = render_pyproject(loaded.manifest, _manifest_ref(loaded), index_map=index_map)
    tmp = files.pyproject.with_suffix(".toml.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(files.pyproject)


def _manifest_ref(loaded: LoadedStack) -> str:
    try:
        return loaded.path.resolve().relative_to(stacks_dir().parent.resolve()).as_posix()
    except ValueError:
        return loaded.path.name


def run_lock(
    loaded: LoadedStack,
    files: LockFiles,
    python: Interpreter,
    *,
    index_map: Mapping[str, str],
    upgrade: bool = False,
    timeout: float = 900,
    vet: Callable[[Path], None] | None = None,
) -> LockState:
    """Generate the project and lock it in a scratch folder; only a successful lock replaces
    the committed files (uv.lock first, the pyproject carrying the hash last, so a kill in
    between reads as stale, never as current). An existing lock is kept as a preference
    (uv only moves what the manifest change forces) unless `upgrade`. `vet` is called with
    the new uv.lock before it replaces the committed one; what it raises leaves them as they
    were (the compatibility check of `lock` refuses a lock that way)."""
    files.folder.parent.mkdir(parents=True, exist_ok=True)
    with _locking(files):
        return _run_lock(
            loaded, files, python, index_map=index_map, upgrade=upgrade, timeout=timeout, vet=vet
        )


@contextlib.contextmanager
def _locking(files: LockFiles) -> Iterator[None]:
    """One `lock` of a stack at a time; scratch folders of killed runs are removed under it."""
    # The lock file lives outside the checkout, so it never shows up as an untracked file.
    tag = hashlib.sha256(str(files.folder.resolve()).encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"stackgate-lock-{tag}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        for stale in files.folder.parent.glob(f".{files.folder.name}-lock-*"):
            shutil.rmtree(stale, ignore_errors=True)
        yield
    finally:
        os.close(fd)


def _run_lock(
    loaded: LoadedStack,
    files: LockFiles,
    python: Interpreter,
    *,
    index_map: Mapping[str, str],
    upgrade: bool,
    timeout: float,
    vet: Callable[[Path], None] | None = None,
) -> LockState:
    scratch = Path(tempfile.mkdtemp(prefix=f".{files.folder.name}-lock-", dir=files.folder.parent))
    try:
        work = LockFiles(scratch)
        if files.lockfile.is_file() and not upgrade:
            shutil.copy2(files.lockfile, work.lockfile)
        write_project(loaded, work, index_map)
        # No --no-config: with it uv 0.13 also drops the project's own [[tool.uv.index]]
        # default and resolves unpinned packages from PyPI. Project settings beat user ones.
        argv: list[str | Path] = [uv_bin(), "lock", "--python", python.path]
        if upgrade:
            argv.append("--upgrade")
        try:
            proc.run(argv, cwd=scratch, env=uv_env(), timeout=timeout)
        except CommandFailed as exc:
            git_sources = {
                name: index_map.get(name, pin.git)
                for name, pin in loaded.manifest.packages.items()
                if pin.git is not None
            }
            specs = index_specs(loaded.manifest, index_map)
            raise explain_uv_failure(exc, specs, git_sources) from exc
        if vet is not None:
            vet(work.lockfile)
        files.folder.mkdir(parents=True, exist_ok=True)
        work.lockfile.replace(files.lockfile)
        work.pyproject.replace(files.pyproject)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return read_lock(loaded, files)


def read_lock(loaded: LoadedStack, files: LockFiles) -> LockState:
    """The committed lock for the stack, or BadInput (exit 2) when missing or stale."""
    stack = loaded.manifest.name
    if not files.pyproject.is_file() or not files.lockfile.is_file():
        raise BadInput(
            f"no lock for stack '{stack}' in {display_path(files.folder)}",
            details=[f"create it with: {regenerate_command(stack)}"],
        )
    try:
        project = tomllib.loads(read_text_bounded(files.pyproject, 1 << 20))
        # One read: the bytes checked against the manifest are the bytes hashed into the
        # build record (two reads could see two locks while `uv lock` rewrites it).
        lock_bytes = read_bytes_bounded(files.lockfile, MAX_LOCK_BYTES)
        lock = parse_uv_lock(lock_bytes.decode("utf-8"), where=str(files.lockfile))
    except (ValueError, RecursionError, BadInput) as exc:  # ValueError: TOMLDecodeError, ints
        fields = exc.details if isinstance(exc, BadInput) else []  # which field, and why
        raise BadInput(
            f"unreadable lock in {display_path(files.folder)}: {exc}",
            details=[*fields, f"regenerate it with: {regenerate_command(stack)}"],
        ) from None
    leaked = _credential_urls(project)
    if leaked:
        raise BadInput(
            f"{display_path(files.pyproject)} holds index credentials (written by an older "
            "stackgate); regenerate the lock and pass them as UV_INDEX_<NAME>_USERNAME/PASSWORD",
            details=[*leaked, f"regenerate it with: {regenerate_command(stack)}"],
        )
    meta = project.get("tool", {}).get("stackgate", {})
    recorded = meta.get("manifest_hash")
    current = manifest_hash(loaded.manifest)
    if recorded != current:
        raise BadInput(
            f"the lock of stack '{stack}' is stale: {display_path(loaded.path)} changed "
            "since it was locked",
            details=[
                f"recorded manifest hash {str(recorded)[:12]}, current {current[:12]}",
                f"refresh it with: {regenerate_command(stack)}",
            ],
        )
    wrong = contradictions(loaded.manifest, lock)
    if wrong:
        raise BadInput(
            f"{display_path(files.lockfile)} contradicts {display_path(loaded.path)}: the lock "
            "was edited after it was generated, or generated for other pins",
            details=[*wrong, f"regenerate it with: {regenerate_command(stack)}"],
        )
    index_map = meta.get("index_map", {})
    return LockState(
        files=files,
        manifest_hash=current,
        lock_hash=hashlib.sha256(lock_bytes).hexdigest(),
        index_map=dict(index_map) if isinstance(index_map, dict) else {},
        lock=lock,
    )


def _credential_urls(project: dict[str, object]) -> list[str]:
    """Redacted URLs with user info anywhere in the generated pyproject's string values."""
    found: list[str] = []
    todo: list[object] = [project]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
        elif isinstance(item, str) and has_credentials(item):
            found.append(redact(item))
    return sorted(found)


def locked_packages(state: LockState) -> dict[str, str]:
    """name -> version of every package in the lock (the virtual project left out)."""
    return state.lock.versions()
