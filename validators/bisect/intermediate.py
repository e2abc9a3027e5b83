"""Intermediate stacks: the baseline's manifest with some change units applied.

Each one is a manifest of its own (`bisect-<hash12>`, named by its content so the same subset
always gives the same stack, lock and env), locked with uv against the indexes of both sides
with the baseline's lock as uv's preference (unchanged distributions keep their versions),
checked before install (`static --lock`) and built with the normal builder.
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stackgate.errors import BadInput, EnvironmentProblem
from stackgate.files import atomic_write_text
from stackgate.layout import LockFiles
from stackgate.lock.state import read_lock
from stackgate.lock.uvlock import UvLock
from stackgate.manifest.loading import LoadedStack, load_stack
from stackgate.python_finder import Interpreter
from validators.bisect import builder_cli
from validators.bisect.manifest_text import toml_text
from validators.bisect.units import ChangeUnit, canonical
from validators.core.pipeline import apply_accepted
from validators.core.results import Result


@dataclass(frozen=True)
class Sides:
    """The two ends of the bisect: manifests as read and their locks."""

    base: LoadedStack
    cand: LoadedStack
    base_lock: UvLock
    cand_lock: UvLock
    base_lockfile: Path


def _registry_index(raw_indexes: Mapping[str, Any], lock: UvLock, name: str) -> str | None:
    """The manifest index a locked distribution came from (by URL), if one of them."""
    pkg = lock.find(name)
    url = (pkg.source.registry or "") if pkg is not None else ""
    for index, spec in raw_indexes.items():
        if isinstance(spec, Mapping) and str(spec.get("url", "")).rstrip("/") == url.rstrip("/"):
            return str(index)
    return None


def _package_key(packages: Mapping[str, Any], name: str) -> str:
    return next((k for k in packages if canonical(k) == canonical(name)), name)


def _set_path(raw: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    node = raw
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            if value is None:
                return
            child = node[part] = {}
        node = child
    if value is None:
        node.pop(last, None)
    else:
        node[last] = copy.deepcopy(value)


def intermediate_raw(
    sides: Sides,
    units: Sequence[ChangeUnit],
    applied: Collection[str],
    *,
    free: Collection[str] = (),
) -> dict[str, Any]:
    """The baseline's manifest with `applied` units' changes (by unit id). Changed
    distributions are pinned to their side's version; those in `free` (canonical names) are
    left to uv (how the set a unit forces along is found)."""
    raw = copy.deepcopy(dict(sides.base.raw))
    indexes = {**copy.deepcopy(sides.cand.raw.get("indexes", {})), **raw.get("indexes", {})}
    raw["indexes"] = indexes
    packages: dict[str, Any] = raw.setdefault("packages", {})
    cand_packages: Mapping[str, Any] = sides.cand.raw.get("packages", {})
    for unit in units:
        on = unit.id in applied
        for change in unit.manifest:
            if on:
                _set_path(raw, change.path, change.new)
        for dist in unit.dists:
            key = _package_key({**cand_packages, **packages}, dist.name)
            version = dist.new if on else dist.old
            if canonical(dist.name) in free or version is None:
                packages.pop(key, None)
                continue
            entry = copy.deepcopy(packages.get(key) or cand_packages.get(key) or {})
            entry.pop("git", None)
            entry["version"] = version
            lock = sides.cand_lock if on else sides.base_lock
            index = _registry_index(indexes, lock, dist.name)
            if index is not None:
                entry["index"] = index
            packages[key] = entry
    return raw


def stack_name(raw: Mapping[str, Any]) -> str:
    body = {k: v for k, v in raw.items() if k not in ("name", "description")}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()
    return f"bisect-{digest[:12]}"


def _referenced_files(raw: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for profile in (raw.get("serving") or {}).values():
        if isinstance(profile, Mapping) and isinstance(profile.get("correctness_reference"), str):
            out.append(profile["correctness_reference"])
    for pin in (raw.get("packages") or {}).values():
        for patch in (pin.get("patches") or []) if isinstance(pin, Mapping) else []:
            if isinstance(patch, Mapping) and isinstance(patch.get("path"), str):
                out.append(patch["path"])
    return out


def write_intermediate(sides: Sides, raw: dict[str, Any], folder: Path, what: str) -> LoadedStack:
    """Write the manifest as folder/<name>.toml (with the files it names beside it, copied from
    the side that has them) and load it the normal way (a bad one is exit 2)."""
    name = stack_name(raw)
    raw = {**raw, "name": name, "description": f"bisect step: {what}"[:400]}
    folder.mkdir(parents=True, exist_ok=True)
    for rel in _referenced_files(raw):
        target = folder / rel
        if target.is_file():
            continue
        for side in (sides.base, sides.cand):
            source = side.folder / rel
            if source.is_file():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
                break
    path = folder / f"{name}.toml"
    text = toml_text(raw)
    if not path.is_file() or path.read_text() != text:
        atomic_write_text(path, text)
    return load_stack(path)


@dataclass(frozen=True)
class Locked:
    files: LockFiles
    lock_hash: str | None  # None: uv found no resolution
    reused: bool
    why: list[str]  # uv's words when it found no resolution


def lock_intermediate(
    loaded: LoadedStack, locks: Path, sides: Sides, python: Interpreter
) -> Locked:
    """The lock of an intermediate stack: the one already made for this manifest (any earlier
    run), else `builder lock` (uv) with the baseline's lock as its preference."""
    files = LockFiles(locks / loaded.manifest.name)
    if files.lockfile.is_file() and files.pyproject.is_file():
        try:
            return Locked(files, read_lock(loaded, files).lock_hash, True, [])
        except BadInput:
            pass
    files.folder.mkdir(parents=True, exist_ok=True)
    shutil.copy2(sides.base_lockfile, files.lockfile)
    locked = builder_cli.lock(loaded.path, locks, python.path)
    if isinstance(locked, builder_cli.Refused):  # no resolution (an index gone is exit 3)
        files.lockfile.unlink(missing_ok=True)
        return Locked(files, None, False, locked.words)
    return Locked(files, locked, False, [])


def check_before_install(loaded: LoadedStack, lockfile: Path) -> list[Result]:
    """`validators static --lock`: the verdict on the locked wheels, before any download of
    a whole wheel (byte ranges, the facts cache). An ERROR (a wheel that cannot be read) is a
    tool problem (exit 3), not a verdict."""
    from stackgate.lock.wheels import LockError
    from stackgate.lock.wheels import read_lock as read_lock_wheels
    from validators.elf.facts_cache import FactsCache, default_root
    from validators.lockcheck.check import LockInputs, find_interpreter, run_lock_check
    from validators.static.run import targets_from

    try:
        wheels = read_lock_wheels(lockfile)
    except LockError as exc:
        raise BadInput(str(exc)) from None
    manifest = loaded.manifest
    results, _report = run_lock_check(
        LockInputs(
            lock=lockfile,
            wheels=wheels,
            cache=FactsCache(default_root()),
            offline=False,
            jobs=6,
            manifest=manifest,
            targets=targets_from(None, manifest),
            interpreter=find_interpreter(wheels.python),
        )
    )
    results = apply_accepted(
        results,
        manifest.validation.accepted_findings,
        manifest.validation.refused_findings,
    )
    errors = [r for r in results if r.status == "ERROR"]
    if errors:
        raise EnvironmentProblem(
            f"static --lock of {lockfile} could not decide",
            details=[f"{r.check}: {r.reason}" for r in errors],
        )
    return results
