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
