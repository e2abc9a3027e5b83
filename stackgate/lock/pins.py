"""Does the lock hold what the manifest pins? Checked before a build creates anything.

The stale check (the manifest hash recorded in the generated pyproject) only proves the lock
was generated for this manifest; a uv.lock edited afterwards (six 1.16.0 under a manifest
pinning 1.17.0, with real 1.16.0 URLs and hashes) still carries the right manifest hash, and
uv 0.13.9's own `uv lock --check` accepts it too (it validates the lock's recorded
requirements, not each locked version against them; measured in docs/guarantees.md). So every
version the manifest names is compared with the lock here: exact pins (`[packages.X] version`)
and the specifiers of `overrides`.
"""

from __future__ import annotations

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from stackgate.lock.uvlock import UvLock
from stackgate.manifest import Manifest


def _versions(lock: UvLock) -> dict[str, list[str]]:
    return {
        name: [p.version for p in pkgs if p.version is not None]
        for name, pkgs in lock.by_name().items()
    }


def _same(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def contradictions(manifest: Manifest, lock: UvLock) -> list[str]:
    """One line per pin the lock does not honour (empty: the lock agrees with the manifest)."""
    locked = _versions(lock)
    out: list[str] = []
    for name, pkg in sorted(manifest.packages.items()):
        versions = locked.get(canonicalize_name(name), [])
        if not versions:
            out.append(f"packages.{name}: pinned by the manifest, absent from uv.lock")
        elif pkg.version is not None and not all(_same(pkg.version, v) for v in versions):
            # every entry: uv forks a resolution by markers, and a second entry for other
            # markers installs its version wherever those markers hold
            out.append(
                f"packages.{name}.version: the manifest pins {pkg.version}, uv.lock has "
                f"{', '.join(versions)}"
            )
    for i, text in enumerate(manifest.overrides):
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue  # the manifest model already refused it
        versions = locked.get(canonicalize_name(req.name), [])
        bad = [v for v in versions if not req.specifier.contains(v, prereleases=True)]
        if bad:
            out.append(f"overrides.{i}: '{text}' but uv.lock has {req.name} {', '.join(bad)}")
    return out
