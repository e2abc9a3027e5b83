"""Source-built packages: a git ref fetched at the locked commit, the manifest's patches
sha256-checked and `git apply --check`-ed before anything is built.

The lock records the commit uv resolved the ref to, so the build compiles exactly that
commit even if the tag moves. Patches must not change the package's dependencies (those
were resolved from the unpatched source when locking).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from stackgate import proc
from stackgate.build_record import PatchRecord
from stackgate.errors import BadInput, CommandFailed, EnvironmentProblem
from stackgate.lock.state import LockState
from stackgate.manifest.files import sha256_regular
from stackgate.manifest.loading import LoadedStack
from stackgate.paths import display_path


@dataclass(frozen=True)
class SourcePackage:
    name: str
    url: str
    commit: str
    subdirectory: str | None
    patches: tuple[tuple[Path, str], ...]  # (file, pinned sha256)


def _locked_git(state: LockState, name: str) -> tuple[str, str] | None:
    """(repository URL, commit) of a git package in uv.lock."""
    pkg = state.lock.find(name)
    return None if pkg is None else pkg.source.git_commit()


def source_packages(loaded: LoadedStack, state: LockState) -> list[SourcePackage]:
    """Git packages of the manifest that carry patches (others are installed from the lock)."""
    out: list[SourcePackage] = []
    for name, pin in sorted(loaded.manifest.packages.items()):
        if pin.git is None or not pin.patches:
            continue
        locked = _locked_git(state, name)
        if locked is None:
            raise BadInput(
                f"package '{name}' is a git source with patches but the lock has no git entry "
                "for it; re-lock the stack"
            )
        url, commit = locked
        patches = tuple((loaded.patch_path(p.path), p.sha256) for p in pin.patches)
        out.append(SourcePackage(name, url, commit, pin.subdirectory, patches))
    return out


def verify_patch_hashes(pkg: SourcePackage) -> list[PatchRecord]:
    records: list[PatchRecord] = []
    for path, pinned in pkg.patches:
        if not path.is_file():
            raise BadInput(f"patch {display_path(path)} for '{pkg.name}' is missing")
        got, why = sha256_regular(path)
        if got is None:
            raise BadInput(f"patch {display_path(path)} for '{pkg.name}': {why}")
        if got != pinned:
            raise BadInput(
                f"patch {display_path(path)} for '{pkg.name}' has sha256 {got}, "
                f"the manifest pins {pinned}"
            )
        records.append(PatchRecord(package=pkg.name, path=str(path), sha256=got))
    return records


def _git_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"})
    return env


def checkout(pkg: SourcePackage, dest: Path) -> Path:
    """Fetch exactly the locked commit into dest (the repository root, where patches apply)."""
    env = _git_env()
    dest.mkdir(parents=True, exist_ok=True)
    try:
        proc.run(["git", "init", "-q", dest], env=env)
        proc.run(
            ["git", "-C", dest, "fetch", "-q", "--depth", "1", "--", pkg.url, pkg.commit],
            env=env,
            timeout=1800,
        )
        proc.run(["git", "-C", dest, "checkout", "-q", "FETCH_HEAD"], env=env)
    except CommandFailed as exc:
        raise EnvironmentProblem(
            f"cannot fetch {pkg.url} at {pkg.commit} for '{pkg.name}'",
            details=[f"map it to a mirror with --index-map {pkg.name}=URL", *exc.details[-4:]],
        ) from exc
    return dest


def build_dir(pkg: SourcePackage, repo: Path) -> Path:
    return repo / pkg.subdirectory if pkg.subdirectory else repo


def check_and_apply(pkg: SourcePackage, repo: Path) -> None:
    """Check then apply each patch in order (a later patch may build on an earlier one), in
    a scratch checkout: a patch that does not apply stops the build before anything is built."""
    env = _git_env()
    for path, _ in pkg.patches:
        try:
            proc.run(["git", "-C", repo, "apply", "--check", path.resolve()], env=env)
        except CommandFailed as exc:
            raise BadInput(
                f"patch {display_path(path)} does not apply to {pkg.name} at "
                f"{pkg.commit[:12]}; nothing was built",
                details=exc.details[-6:],
            ) from exc
        proc.run(["git", "-C", repo, "apply", path.resolve()], env=env)
