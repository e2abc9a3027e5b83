"""Which of a lock's packages uv installs into one environment.

A uv lock is universal: it holds every package any supported environment may need, each edge
of its graph guarded by a PEP 508 marker. `uv sync` walks the graph from the project for the
interpreter it installs into and leaves out what a false marker guards (pyzmq needs cffi only
`implementation_name == 'pypy'`; a `python_full_version >= '3.13'` backport stays out of a 3.12
env). "Installed equals the lock" compares the env with this walk, not with every package of
the lock: vLLM 0.12.0's lock holds cffi and pycparser (PyPy-only through pyzmq), which a
CPython env never gets.

The walk follows a package's optional dependencies for the extras an edge asks for, the
project's own dependencies and its default `dev` group (what `uv sync` installs by default).
A marker that cannot be evaluated counts as true: the package is then expected, never silently
let off.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName
from packaging.markers import default_environment as _host_markers

from stackgate.lock.uvlock import LockedDependency, LockedPackage, UvLock

DEFAULT_GROUP = "dev"


def env_markers(python_full_version: str | None) -> dict[str, str]:
    """PEP 508 marker values of an env on this host: the host's platform, the env's Python
    (X.Y.Z; None: this interpreter's)."""
    values = {key: str(value) for key, value in _host_markers().items()}
    if python_full_version:
        values["python_full_version"] = python_full_version
        values["python_version"] = ".".join(python_full_version.split(".")[:2])
        if values.get("implementation_name") == "cpython":
            values["implementation_version"] = python_full_version
    return values


def env_python_version(env: Path) -> str | None:
    """X.Y.Z from the env's pyvenv.cfg (`version_info` as uv writes it, `version` as venv
    does); None when it has neither."""
    try:
        text = (env / "pyvenv.cfg").read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition("=")
        match = re.match(r"\s*(\d+\.\d+\.\d+)", value)
        if key.strip() in ("version_info", "version") and match:
            return match.group(1)
    return None


def _holds(marker: str | None, markers: Mapping[str, str]) -> bool:
    if marker is None:
        return True
    try:
        return Marker(marker).evaluate(dict(markers))
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
        return True


def installed_set(lock: UvLock, markers: Mapping[str, str]) -> dict[str, list[str]]:
    """canonical name -> the versions of it uv installs for an environment with these marker
    values (the lock's own project left out)."""
    by_key: dict[str, list[LockedPackage]] = {}
    for pkg in lock.package:
        by_key.setdefault(pkg.key, []).append(pkg)

    def targets(edge: LockedDependency) -> list[LockedPackage]:
        found = by_key.get(LockedPackage(name=edge.name).key, [])
        return [p for p in found if edge.version is None or p.version == edge.version]

    seen: set[tuple[int, frozenset[str]]] = set()
    todo: list[tuple[LockedPackage, frozenset[str]]] = [
        (pkg, frozenset()) for pkg in lock.package if pkg.source.is_project
    ]
    reached: dict[str, set[str]] = {}
    while todo:
        pkg, extras = todo.pop()
        edges = list(pkg.dependencies)
        for extra in sorted(extras):
            edges += pkg.optional_dependencies.get(extra, [])
        if pkg.source.is_project:
            edges += pkg.dev_dependencies.get(DEFAULT_GROUP, [])
        for edge in edges:
            if not _holds(edge.marker, markers):
                continue
            for target in targets(edge):
                state = (id(target), frozenset(edge.extra))
                if state in seen:
                    continue
                seen.add(state)
                todo.append((target, frozenset(edge.extra)))
                if not target.source.is_project and target.version is not None:
                    reached.setdefault(target.key, set()).add(target.version)
    return {key: sorted(versions) for key, versions in sorted(reached.items())}
