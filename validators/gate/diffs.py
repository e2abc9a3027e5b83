"""Differences between two flat maps (package versions, env vars) and two manifests."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from stackgate.model import StrictModel

ChangeKind = Literal["changed", "added", "removed"]


class Change(StrictModel):
    key: str
    kind: ChangeKind
    a: str | None
    b: str | None


def diff_flat(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Change]:
    """Keys whose values differ, were added in b, or removed from a (sorted by key)."""
    out: list[Change] = []
    for key in sorted(set(a) | set(b)):
        if key not in b:
            out.append(Change(key=key, kind="removed", a=_text(a[key]), b=None))
        elif key not in a:
            out.append(Change(key=key, kind="added", a=None, b=_text(b[key])))
        elif a[key] != b[key]:
            out.append(Change(key=key, kind="changed", a=_text(a[key]), b=_text(b[key])))
    return out


VERSIONS_UNKNOWN = "versions unknown (the run report holds only the env's tree hash)"


class VersionsDiff(StrictModel):
    """Package versions of two sides, where both are known. A run report (not a record)
    carries its env's tree hash but no package list: its versions are unknown, not removed."""

    changes: list[Change]
    unknown: list[Literal["baseline", "candidate"]]
    same_tree: bool | None = None  # both tree hashes known: equal or not

    def summary(self, names: Mapping[str, str] | None = None) -> str | None:
        """One line for the unknown side(s), or None when both sides' versions are known.
        names: how to call each side ("baseline"/"candidate" unless given)."""
        if not self.unknown:
            return None
        sides = " and ".join(f"{(names or {}).get(side, side)}'s" for side in self.unknown)
        tree = {None: "", True: "; env trees identical", False: "; env trees differ"}[
            self.same_tree
        ]
        return f"package versions: {sides} {VERSIONS_UNKNOWN}{tree}"


def diff_versions(
    baseline: Mapping[str, str],
    candidate: Mapping[str, str],
    trees: tuple[str | None, str | None] = (None, None),
) -> VersionsDiff:
    """Compare what is known: a side with no package list is unknown, not empty."""
    unknown: list[Literal["baseline", "candidate"]] = []
    if not baseline:
        unknown.append("baseline")
    if not candidate:
        unknown.append("candidate")
    same = trees[0] == trees[1] if trees[0] and trees[1] else None
    changes = [] if unknown else diff_flat(baseline, candidate)
    return VersionsDiff(changes=changes, unknown=unknown, same_tree=same)


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested tables to dotted keys; lists stay values (their order is meaningful)."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            flat.update(flatten(value, dotted))
        else:
            flat[dotted] = value
    return flat


def diff_manifests(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Change]:
    """Manifest differences by dotted path, ignoring the stack's own name and description."""
    ignore = {"name", "description"}
    fa = {k: v for k, v in flatten(a).items() if k not in ignore}
    fb = {k: v for k, v in flatten(b).items() if k not in ignore}
    return diff_flat(fa, fb)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)
