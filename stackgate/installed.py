"""What an environment has installed, and the one rule for "installed equals the lock".

One reader for both sides: the builder (which refuses to select an env that is not exactly its
lock) and the static group (which reports an env that drifted from it) read each
`*.dist-info/METADATA` of a site-packages folder here, in name order, and compare with
`lock_differences`:

- versions are equal when PEP 440 says so (`1.0` == `1.0.0`; a local tag counts:
  `2.9.1+cu128` != `2.9.1`); a version PEP 440 cannot read is compared as text;
- an installed distribution the lock does not hold is a difference, except the seed packages
  a venv creator may add (pip, setuptools, wheel): uv never locks those unless the project
  depends on them, and when the lock does hold one its version is compared like any other.

Two readers drift apart: one comparing versions as text and counting a seeded pip as unlocked,
the other skipping pip/setuptools/wheel even where the lock pins them at another version.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from importlib.metadata import PackageMetadata, PathDistribution
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

# Installed by a venv creator (`python -m venv`, `uv venv --seed`), not by the lock.
SEEDS = frozenset({"pip", "setuptools", "wheel"})


@dataclass(frozen=True)
class Distribution:
    name: str
    version: str
    dist_info: Path
    requires: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return canonicalize_name(self.name)

    def label(self) -> str:
        return f"{self.name} {self.version}"

    def requirements(self) -> list[Requirement]:
        """Its Requires-Dist entries that parse (an unparseable one names nothing to check)."""
        return list(self._parsed)

    @functools.cached_property
    def _parsed(self) -> tuple[Requirement, ...]:  # parsed once: asked for many times a run
        out = []
        for text in self.requires:
            try:
                out.append(Requirement(text))
            except InvalidRequirement:
                continue
        return tuple(out)


def _header(meta: PackageMetadata, key: str) -> str | None:
    """One METADATA header, None when absent (`meta[key]` warns on a missing key)."""
    values = meta.get_all(key)
    return str(values[0]) if values else None


def read_metadata(dist_info: Path) -> Distribution | None:
    """One *.dist-info folder's distribution; None when unreadable or without Name/Version."""
    try:
        headers = PathDistribution(dist_info).metadata
    except (OSError, UnicodeDecodeError):
        return None
    name, version = _header(headers, "Name"), _header(headers, "Version")
    if not name or not version:
        return None
    requires = tuple(headers.get_all("Requires-Dist") or ())
    return Distribution(name=name, version=version, dist_info=dist_info, requires=requires)


def read_dist_infos(site: Path) -> list[Distribution]:
    """Every readable *.dist-info of one site-packages folder, in folder-name order (two
    folders of one distribution both listed: the static group reads both RECORDs)."""
    found = (read_metadata(dist_info) for dist_info in sorted(site.glob("*.dist-info")))
    return [dist for dist in found if dist is not None]


def read_distributions(site: Path) -> dict[str, Distribution]:
    """canonical name -> distribution installed in one site-packages folder (of two folders
    of one name, the later in folder-name order is the one kept)."""
    out = {dist.key: dist for dist in read_dist_infos(site)}
    return dict(sorted(out.items()))


def same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


@dataclass
class LockDifferences:
    """How an env's installed distributions differ from a lock, by canonical name."""

    # (name, the lock's versions, the installed version)
    mismatched: list[tuple[str, list[str], str]] = field(default_factory=list)
    not_locked: list[str] = field(default_factory=list)  # installed, not in the lock
    not_installed: list[tuple[str, list[str]]] = field(default_factory=list)

    def exact(self) -> bool:
        return not (self.mismatched or self.not_locked or self.not_installed)


def lock_differences(
    installed: Mapping[str, str], locked: Mapping[str, Collection[str]]
) -> LockDifferences:
    """installed: canonical name -> version; locked: canonical name -> the lock's versions
    of it (a universal lock may hold several). See the module docstring for the rule."""
    out = LockDifferences()
    for key, version in sorted(installed.items()):
        versions = sorted(set(locked.get(key, ())))
        if not versions:
            if key not in SEEDS:
                out.not_locked.append(key)
        elif not any(same_version(version, v) for v in versions):
            out.mismatched.append((key, versions, version))
    for key, wanted in sorted(locked.items()):
        if key not in installed:
            out.not_installed.append((key, sorted(set(wanted))))
    return out
