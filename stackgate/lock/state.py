"""A stack's committed lock as both sides read it: current (generated for this manifest,
holding what it pins) or not (exit 2), its hash and contents. The builder writes locks
(builder/lock/resolve.py runs uv); the validators read them (bisect) without importing the
builder: this module is the door between them (tests/foundation/test_import_plan.py).

Staleness: the generated pyproject's [tool.stackgate].manifest_hash against the manifest's
current hash of LOCK_FIELDS; then every version the manifest pins against the lock
(stackgate.lock.pins)."""

from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import dataclass

from stackgate.credentials import has_credentials, redact
from stackgate.errors import BadInput
from stackgate.files import read_bytes_bounded, read_text_bounded
from stackgate.layout import LockFiles
from stackgate.lock.pins import contradictions
from stackgate.lock.uvlock import MAX_LOCK_BYTES, UvLock, parse_uv_lock
from stackgate.manifest import Manifest
from stackgate.manifest.loading import LoadedStack
from stackgate.paths import display_path, stacks_dir

# The fields a lock is a function of. Serving, validation, environment and build settings
# can change without re-locking.
LOCK_FIELDS = ("name", "python", "platform", "indexes", "packages", "overrides")


def manifest_hash(manifest: Manifest) -> str:
    """sha256 of the canonical JSON of the lock-relevant manifest fields."""
    data = manifest.model_dump(mode="json", include=set(LOCK_FIELDS))
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def regenerate_command(stack: str) -> str:
    """The command that locks `stack` (a name in stacks/ or a manifest's path) again."""
    from stackgate.cli_hint import cli_command

    return cli_command(["lock", stack])


@dataclass(frozen=True)
class LockState:
    files: LockFiles
    manifest_hash: str
    lock_hash: str
    index_map: dict[str, str]
    lock: UvLock

    @property
    def short_hash(self) -> str:
        return self.lock_hash[:12]


def read_lock(loaded: LoadedStack, files: LockFiles) -> LockState:
    """The committed lock for the stack, or BadInput (exit 2) when missing or stale."""
    name = loaded.manifest.name
    # How the user names this stack on a command line: its name in stacks/, else its path.
    stack = name if loaded.path.parent.resolve() == stacks_dir() else display_path(loaded.path)
    if not files.pyproject.is_file() or not files.lockfile.is_file():
        raise BadInput(
            f"no lock for stack '{name}' in {display_path(files.folder)}",
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
            f"the lock of stack '{name}' is stale: {display_path(loaded.path)} changed "
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
