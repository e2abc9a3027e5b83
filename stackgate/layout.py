"""Where environments and locks live: the one place these paths are computed.

Venv root:   --venv-root, else $STACKGATE_VENV_ROOT, else <checkout>/envs
             <root>/<stack>/<stack>-<lockhash12>/   finished envs
             <root>/<stack>/<name>.partial/           a build in progress
             <root>/<stack>/current -> <name>          the selected env
             <root>/<stack>/.build.lock               flock: one build at a time
Locks:       beside the manifest: <its folder>/locks/<stack>/{pyproject.toml,uv.lock}, so
             stacks/cu128.toml locks into stacks/locks/cu128/ and ~/mine.toml into
             ~/locks/mine/ (never into the checkout); --locks-dir replaces <its folder>/locks

The builder creates and switches these (builder.venv.atomic); validators, serve-bench --dry-run
and the gate only read them, through the same functions, so they cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stackgate.build_record import build_record_path, read_build_record
from stackgate.cli_hint import cli_command
from stackgate.errors import BadInput
from stackgate.path_kind import kind_of
from stackgate.paths import project_root, stacks_dir
from stackgate.settings import value

VENV_ROOT_ENV = "STACKGATE_VENV_ROOT"
PARTIAL_SUFFIX = ".partial"
CURRENT = "current"
LOCK_NAME = ".build.lock"
LOCKS_DIRNAME = "locks"


def default_venv_root() -> Path:
    """$STACKGATE_VENV_ROOT, else <checkout>/envs."""
    return Path(value(VENV_ROOT_ENV) or project_root() / "envs")


def venv_root(given: Path | None = None) -> Path:
    """The venv root to use: `given` (a --venv-root flag) or the default.

    A path that exists and is not a folder is bad input (exit 2), named with where it came
    from, before anything is created under it.
    """
    root = given if given is not None else default_venv_root()
    source = "--venv-root" if given is not None else f"${VENV_ROOT_ENV} / default venv root"
    if kind_of(root) not in (None, "folder"):
        raise BadInput(f"{root}: not a folder ({source} must name a folder for environments)")
    return root


@dataclass(frozen=True)
class EnvLayout:
    root: Path  # the venv root
    stack: str

    @property
    def stack_dir(self) -> Path:
        return self.root / self.stack

    @property
    def current(self) -> Path:
        return self.stack_dir / CURRENT

    @property
    def lock_path(self) -> Path:
        return self.stack_dir / LOCK_NAME

    def selected(self) -> Path:
        """`current`, once it is known to belong to this stack (it may not exist yet).

        The builder makes it a relative link to a folder beside it named `<stack>-<hash>`
        (atomic.switch_current). A `current` that is something else, leads out of the stack's
        folder or to an env whose build record names another stack made `builder verify` and
        `validators run` judge another stack's env and say OK: bad input (exit 2), naming
        where it leads.
        """
        link = self.current
        if not link.is_symlink():
            if link.exists():
                raise BadInput(
                    f"{link}: not the link the builder makes (a folder or file in its place)"
                )
            return link
        target = str(link.readlink())
        resolved = link.resolve()
        if (
            "/" in target
            or resolved.parent != self.stack_dir.resolve()
            or not target.startswith(f"{self.stack}-")
        ):
            raise BadInput(
                f"{link} leads to {target} ({resolved}), not an env of stack '{self.stack}' "
                f"in {self.stack_dir}",
                details=[f"select one with: {cli_command(['build', self.stack])}"],
            )
        record = build_record_path(resolved)
        if record.is_file():
            built_for = read_build_record(resolved).stack
            if built_for != self.stack:
                raise BadInput(
                    f"{link} leads to {resolved}, built for stack '{built_for}', not '{self.stack}'"
                )
        return link

    def env_name(self, lock_hash: str) -> str:
        return f"{self.stack}-{lock_hash[:12]}"

    def final(self, lock_hash: str) -> Path:
        return self.stack_dir / self.env_name(lock_hash)

    def partial(self, lock_hash: str) -> Path:
        return self.stack_dir / (self.env_name(lock_hash) + PARTIAL_SUFFIX)


def current_env(stack: str, root: Path | None = None) -> Path:
    """<venv root>/<stack>/current: the env the builder selected last (checked: selected())."""
    return EnvLayout(venv_root(root), stack).selected()


def locks_dir(stacks: Path | None = None) -> Path:
    return (stacks or stacks_dir()) / LOCKS_DIRNAME


@dataclass(frozen=True)
class LockFiles:
    """A stack's generated uv project and its lock."""

    folder: Path

    @property
    def pyproject(self) -> Path:
        return self.folder / "pyproject.toml"

    @property
    def lockfile(self) -> Path:
        return self.folder / "uv.lock"


def lock_files(stack: str, root: Path | None = None) -> LockFiles:
    """The lock folder of a stack in stacks/ known by name: <root or stacks/locks>/<stack>."""
    return LockFiles((root or locks_dir()) / stack)


def lock_files_of(manifest_path: Path, stack: str, root: Path | None = None) -> LockFiles:
    """The lock folder of the manifest at `manifest_path`: beside it, <its folder>/locks/<stack>
    (a shipped stack: stacks/locks/<stack>), or <root>/<stack> with --locks-dir. A manifest
    kept elsewhere never locks into the checkout: a copy named like a shipped stack would
    overwrite that stack's committed lock."""
    return LockFiles((root or manifest_path.parent / LOCKS_DIRNAME) / stack)
