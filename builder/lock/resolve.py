"""Write a stack's generated uv project, run `uv lock`, and tell a current lock from a stale one.

Layout: stacks/locks/<stack>/pyproject.toml (generated) and stacks/locks/<stack>/uv.lock.
Staleness: the pyproject's [tool.stackgate].manifest_hash against the manifest's current
hash of LOCK_FIELDS. uv's own errors are turned into ours: an index that cannot be reached is
an environment problem (exit 3) naming the index and its URL; a resolution without solution is
bad input (exit 2: the pins contradict each other).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from builder.lock.uvproject import IndexSpec, index_specs, render_pyproject
from stackgate import proc, waits
from stackgate.errors import BadInput, CommandFailed, EnvironmentProblem
from stackgate.layout import LockFiles
from stackgate.lines import lines_err
from stackgate.lock.state import LockState, read_lock
from stackgate.manifest.loading import LoadedStack
from stackgate.paths import display_path, stacks_dir
from stackgate.python_finder import Interpreter
from stackgate.uvbin import uv_bin

# Words uv (reqwest/hyper) uses when a host cannot be reached, as opposed to "no solution".
# One `stackgate lock` of a stack waits this long for another, then stops naming the holder.
LOCK_WAIT_S = 1800.0
_NETWORK_WORDS = re.compile(
    r"dns error|failed to lookup|connection refused|connect error|timed out|"
    r"error sending request|network|tcp connect|unreachable|Could not connect|"
    r"failed to fetch|HTTP status server error|404 Not Found|No such file or directory",
    re.IGNORECASE,
)


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
    credentials: Mapping[str, str] | None = None,
    upgrade: bool = False,
    timeout: float = 900,
    vet: Callable[[Path], None] | None = None,
) -> LockState:
    """Generate the project and lock it in a scratch folder; only a successful lock replaces
    the committed files (uv.lock first, the pyproject carrying the hash last, so a kill in
    between reads as stale, never as current). An existing lock is kept as a preference
    (uv only moves what the manifest change forces) unless `upgrade`. `vet` is called with
    the new uv.lock before it replaces the committed one; what it raises leaves them as they
    were (the compatibility check of `lock` refuses a lock that way). `credentials`
    (UV_INDEX_<NAME>_USERNAME/PASSWORD) go to uv's environment only, never to a file."""
    files.folder.parent.mkdir(parents=True, exist_ok=True)
    with _locking(files):
        return _run_lock(loaded, files, python, index_map, credentials or {}, upgrade, timeout, vet)


@contextlib.contextmanager
def _locking(files: LockFiles) -> Iterator[None]:
    """One `lock` of a stack at a time; scratch folders of killed runs are removed under it."""
    # The lock file lives outside the checkout (never an untracked file), in this user's own
    # lock folder (stackgate.waits: never /tmp, where any user could hold it first), and the
    # wait on it is bounded and said.
    tag = hashlib.sha256(str(files.folder.resolve()).encode()).hexdigest()[:16]
    path = waits.lock_dir() / f"lock-{tag}.lock"
    with waits.held(
        path,
        what=f"another `stackgate lock` of {display_path(files.folder)}",
        timeout_s=LOCK_WAIT_S,
        say=lines_err().plain,
    ):
        for stale in files.folder.parent.glob(f".{files.folder.name}-lock-*"):
            shutil.rmtree(stale, ignore_errors=True)
        yield


def _run_lock(
    loaded: LoadedStack,
    files: LockFiles,
    python: Interpreter,
    index_map: Mapping[str, str],
    credentials: Mapping[str, str],
    upgrade: bool,
    timeout: float,
    vet: Callable[[Path], None] | None,
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
            proc.run(argv, cwd=scratch, env=uv_env(credentials), timeout=timeout)
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


def locked_packages(state: LockState) -> dict[str, str]:
    """name -> version of every package in the lock (the virtual project left out)."""
    return state.lock.versions()
