"""Change units: what differs between the baseline's lock + manifest and the candidate's.

One unit per changed distribution (its locked version, or its presence) and one per changed
manifest value (an environment variable, a profile argument, a package's patches). Units that
the resolver cannot move apart are merged later (validators/bisect/session.py), with the reason.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from packaging.utils import canonicalize_name
from pydantic import BaseModel, ConfigDict

from stackgate.lock.uvlock import UvLock

# Manifest keys that are not changes to bisect: the stack's identity, where packages come from
# (intermediates resolve against both sides' indexes), the versions (the locks say those), and
# the validation policy (the baseline's is the one every step is gated under).
NOT_UNITS = ("name", "description", "indexes", "validation", "schema_version")


class DistChange(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    old: str | None  # None: not in the baseline's lock
    new: str | None  # None: not in the candidate's lock

    def text(self) -> str:
        return f"{self.name} {self.old or '(absent)'} -> {self.new or '(absent)'}"


class ManifestChange(BaseModel):
    model_config = ConfigDict(frozen=True)

    path: str  # dotted, e.g. serving.main.env.NCCL_P2P_LEVEL
    old: Any = None  # None: not in the baseline's manifest
    new: Any = None

    def text(self) -> str:
        return f"{self.path}: {self.old!r} -> {self.new!r}"


class ChangeUnit(BaseModel):
    """Changes applied together: one, or several that uv will not resolve apart."""

    model_config = ConfigDict(frozen=True)

    id: str
    dists: tuple[DistChange, ...] = ()
    manifest: tuple[ManifestChange, ...] = ()
    merged_because: str | None = None

    @property
    def label(self) -> str:
        return ", ".join([d.text() for d in self.dists] + [m.text() for m in self.manifest])

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.dists) + tuple(m.path for m in self.manifest)


def lock_versions(lock: UvLock) -> dict[str, str]:
    """Canonical name -> version of every locked distribution (the first, if several)."""
    return {key: pkgs[0].version or "" for key, pkgs in lock.by_name().items()}


def dist_changes(base: Mapping[str, str], cand: Mapping[str, str]) -> list[DistChange]:
    names = sorted(set(base) | set(cand))
    return [
        DistChange(name=n, old=base.get(n), new=cand.get(n))
        for n in names
        if base.get(n) != cand.get(n)
    ]


def _leaves(data: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(data, dict) and (not prefix or data):
        for key, value in data.items():
            yield from _leaves(value, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, data


def _skipped(path: str) -> bool:
    top = path.split(".", 1)[0]
    if top in NOT_UNITS:
        return True
    parts = path.split(".")
    # packages.NAME.version: the lock's dist change; index/extras follow the version
    return top == "packages" and len(parts) >= 3 and parts[2] in ("version", "index")


def manifest_changes(base: Mapping[str, Any], cand: Mapping[str, Any]) -> list[ManifestChange]:
    """Every differing leaf of the two manifests (tables walked, lists compared whole)."""
    left = dict(_leaves(dict(base)))
    right = dict(_leaves(dict(cand)))
    out = []
    for path in sorted(set(left) | set(right)):
        if _skipped(path) or left.get(path) == right.get(path):
            continue
        out.append(ManifestChange(path=path, old=left.get(path), new=right.get(path)))
    return out


def change_units(
    base_lock: UvLock, cand_lock: UvLock, base_raw: Mapping[str, Any], cand_raw: Mapping[str, Any]
) -> list[ChangeUnit]:
    """One unit per changed distribution, then one per changed manifest value, numbered."""
    dists = dist_changes(lock_versions(base_lock), lock_versions(cand_lock))
    units = [ChangeUnit(id="", dists=(d,)) for d in dists]
    units += [ChangeUnit(id="", manifest=(m,)) for m in manifest_changes(base_raw, cand_raw)]
    return [u.model_copy(update={"id": f"u{i:02d}"}) for i, u in enumerate(units, start=1)]


def merge(units: list[ChangeUnit], ids: set[str], why: str) -> list[ChangeUnit]:
    """The units named by `ids` as one (at the place of the first), the others as they are."""
    chosen = [u for u in units if u.id in ids]
    first = chosen[0]
    reasons = [u.merged_because for u in chosen if u.merged_because]
    joined = ChangeUnit(
        id="+".join(u.id for u in chosen),
        dists=tuple(d for u in chosen for d in u.dists),
        manifest=tuple(m for u in chosen for m in u.manifest),
        merged_because="; ".join([*reasons, why]),
    )
    out: list[ChangeUnit] = []
    for u in units:
        if u.id == first.id:
            out.append(joined)
        elif u.id not in ids:
            out.append(u)
    return out


def canonical(name: str) -> str:
    return str(canonicalize_name(name))
