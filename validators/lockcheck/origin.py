"""The pre-install verdict checks where the lock's files come from before it reads a byte of
them: the same check `builder wheelhouse` and `builder build` run
(builder/lock/origin.py), against the manifest of the stack the verdict is asked about.

Without a stack there is no manifest naming the indexes: the verdict then reads the files the
lock names and says that it did not check their origin (static.lock.origin SKIP).
"""

from __future__ import annotations

import dataclasses
import hashlib
import tomllib
from pathlib import Path

from builder.lock.origin import check_origins
from stackgate.bounded_http import Budget, Limits
from stackgate.errors import BadInput, EnvironmentProblem
from stackgate.files import read_text_bounded
from stackgate.layout import LockFiles
from stackgate.lock.state import LockState
from stackgate.lock.uvlock import MAX_LOCK_BYTES, UvLock, parse_uv_lock
from stackgate.manifest import Manifest
from validators.core.results import Result, make_result

MAX_PYPROJECT_BYTES = 1 << 20


@dataclasses.dataclass(frozen=True)
class OriginChecked:
    lock: UvLock  # the one read of the lock's bytes
    limits: Limits  # what is left of the verdict's deadline
    checked: bool  # False: no manifest to check against


def _index_map(folder: Path) -> dict[str, str]:
    """The `--index-map` recorded at lock time in the generated pyproject beside the lock (as
    `builder build` reads it); none when there is no such file."""
    pyproject = folder / "pyproject.toml"
    if not pyproject.is_file():
        return {}
    try:
        data = tomllib.loads(read_text_bounded(pyproject, MAX_PYPROJECT_BYTES))
    except (ValueError, RecursionError) as exc:
        raise BadInput(f"{pyproject}: not a readable pyproject.toml: {exc}") from None
    recorded = data.get("tool", {}).get("stackgate", {}).get("index_map", {})
    if not isinstance(recorded, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in recorded.items()
    ):
        raise BadInput(f"{pyproject}: tool.stackgate.index_map: not a table of index URLs")
    return dict(recorded)


def check_lock_origin(
    lock_path: Path, manifest: Manifest | None, limits: Limits, *, offline: bool
) -> OriginChecked:
    """Read the lock once; with a manifest, refuse it (BadInput, exit 2) when a file does not
    come from the index the manifest names for its package, before any wheel is fetched.
    Index pages are read through the bounded reader within the verdict's deadline; offline,
    only file:// indexes' pages (on disk) are read."""
    text = read_text_bounded(lock_path, MAX_LOCK_BYTES)
    lock = parse_uv_lock(text, where=str(lock_path))
    if manifest is None:
        return OriginChecked(lock, limits, checked=False)
    state = LockState(
        files=LockFiles(lock_path.parent),
        manifest_hash="",
        lock_hash=hashlib.sha256(text.encode()).hexdigest(),
        index_map=_index_map(lock_path.parent),
        lock=lock,
    )
    budget = Budget(limits, what="the pre-install verdict")
    check_origins(manifest, state, listing=True, network=not offline, budget=budget)
    left = budget.total.left()
    if left <= 0:
        raise EnvironmentProblem(
            f"the pre-install verdict passed its {limits.total_s:g} s deadline while checking "
            "where the lock's files come from"
        )
    return OriginChecked(lock, dataclasses.replace(limits, total_s=left), checked=True)


def origin_result(checked: OriginChecked, manifest: Manifest | None, offline: bool) -> Result:
    """static.lock.origin: what was checked of where the lock's files come from."""
    if not checked.checked or manifest is None:
        return make_result(
            "static.lock.origin",
            "SKIP",
            "no stack given: the lock's files were read from the URLs it names, unchecked "
            "against a manifest's indexes (give the stack to check them)",
            group="static",
        )
    how = "the registry (offline: pages of file:// indexes only)" if offline else "its page"
    return make_result(
        "static.lock.origin",
        "PASS",
        f"every locked file comes from the index {manifest.name}'s manifest names for its "
        f"package, checked against {how} before any was fetched",
        group="static",
    )
