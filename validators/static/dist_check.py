"""Installed distributions against the manifest's pins and the committed lock.

Three questions, each answered from files only: do the manifest's exact pins (local tags such
as +cu130 included) match what is installed (a torch swapped by a later `pip install` shows
here); does every installed distribution appear in the lock at its locked version; are the
installed distributions' own requirements met (what `pip check` asks). sgl-kernel 0.3.21
declares no requirement on torch at all, so the last one cannot see the torch ABI break: the
ABI check does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from packaging.markers import UndefinedEnvironmentName
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from stackgate.installed import Distribution, lock_differences, same_version
from stackgate.layout import lock_files
from stackgate.lock.uvlock import UvLock
from stackgate.manifest import Manifest
from validators.static.environment import Environment


def lock_path(stack: str) -> Path:
    return lock_files(stack).lockfile


@dataclass
class DistFindings:
    pin_mismatches: list[str] = field(default_factory=list)
    pins_missing: list[str] = field(default_factory=list)
    not_in_lock: list[str] = field(default_factory=list)
    lock_mismatches: list[str] = field(default_factory=list)
    unmet_requirements: list[str] = field(default_factory=list)
    pins_checked: int = 0


def check_pins(manifest: Manifest, env: Environment, findings: DistFindings) -> None:
    for name, pin in manifest.packages.items():
        if pin.version is None and pin.ref is None:
            continue
        have = env.distributions.get(canonicalize_name(name))
        findings.pins_checked += 1
        if have is None:
            if not pin.optional:
                findings.pins_missing.append(
                    f"{name}: pinned {pin.version or pin.ref}, not installed"
                )
            continue
        if pin.version is not None and not same_version(have.version, pin.version):
            findings.pin_mismatches.append(
                f"{name}: manifest pins {pin.version}, installed {have.version}"
                + (" (silent torch swap?)" if canonicalize_name(name) == "torch" else "")
            )
        elif pin.ref is not None and re.fullmatch(r"v?\d+(\.\d+)+", pin.ref):
            wanted = pin.ref.lstrip("v")
            if Version(have.version).base_version != Version(wanted).base_version:
                findings.pin_mismatches.append(
                    f"{name}: manifest pins ref {pin.ref}, installed {have.version}"
                )


def check_lock(locked: UvLock, env: Environment, findings: DistFindings) -> None:
    """The env against its lock by stackgate.installed's one rule (the builder's too); a
    locked package not installed is no finding here: a universal lock holds other platforms'."""
    installed = {key: dist.version for key, dist in env.distributions.items()}
    wanted = {k: [p.version or "" for p in pkgs] for k, pkgs in locked.by_name().items()}
    diff = lock_differences(installed, wanted)
    for key in diff.not_locked:
        dist = env.distributions[key]
        findings.not_in_lock.append(f"{dist.name} {dist.version}")
    for key, versions, have in diff.mismatched:
        name = env.distributions[key].name
        findings.lock_mismatches.append(f"{name}: lock has {', '.join(versions)}, installed {have}")


def applies(env: Environment, req: Requirement, extras: tuple[str, ...] = ()) -> bool:
    """Does `req` apply in this env, for the distribution installed with `extras`?"""
    if req.marker is None:
        return True
    base = env.marker_env()
    try:
        return any(req.marker.evaluate({**base, "extra": e}) for e in ("", *extras))
    except UndefinedEnvironmentName:
        return False


def applicable_requirements(env: Environment, dist: Distribution) -> list[Requirement]:
    """The requirements of `dist` that apply in this env (markers evaluated for the env's
    Python, no extras)."""
    return [req for req in dist.requirements() if applies(env, req)]


def dependents(env: Environment, dist: Distribution) -> list[Distribution]:
    """Installed distributions that require `dist` (not as an extra): when `dist` cannot be
    imported, each of them goes down too if it imports it (sglang, xgrammar, tilelang under
    a torch whose libtorch_cuda.so cannot load), which no symbol check sees."""
    return [
        other
        for other in env.distributions.values()
        if other.key != dist.key
        and any(canonicalize_name(r.name) == dist.key for r in applicable_requirements(env, other))
    ]


def check_requirements(env: Environment, findings: DistFindings) -> None:
    for dist in env.distributions.values():
        for req in applicable_requirements(env, dist):
            have = env.distributions.get(canonicalize_name(req.name))
            if have is None:
                findings.unmet_requirements.append(f"{dist.label()} requires {req}, not installed")
            elif req.specifier and not req.specifier.contains(have.version, prereleases=True):
                findings.unmet_requirements.append(
                    f"{dist.label()} requires {req}, installed {have.version}"
                )


def requirement_closure(env: Environment, roots: dict[str, list[str]]) -> set[str]:
    """Canonical names of the installed distributions the roots need, transitively.

    `roots` maps a distribution name to the extras asked for. What lies outside this set is
    installed but not needed by the stack (e.g. cupy beside torch on a shared machine).
    """
    seen: set[str] = set()
    queue = [(canonicalize_name(n), tuple(x)) for n, x in roots.items()]
    while queue:
        name, extras = queue.pop()
        dist = env.distributions.get(name)
        if dist is None or (name in seen and not extras):
            continue
        seen.add(name)
        for req in dist.requirements():
            if not applies(env, req, extras):
                continue
            child = canonicalize_name(req.name)
            if child not in seen:
                queue.append((child, tuple(req.extras)))
    return seen
