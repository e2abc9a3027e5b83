"""What an env has installed, read from each distribution's METADATA (importlib.metadata, no
subprocess), and the check that it is exactly its lock."""

from __future__ import annotations

import importlib.metadata
from importlib.metadata import PackageMetadata
from pathlib import Path

from packaging.utils import canonicalize_name

from builder import envprofile
from builder.lock import LockState, locked_packages
from stackgate.errors import EnvironmentProblem


def installed_distributions(env: Path) -> dict[str, str]:
    """canonical name -> version of every *.dist-info in the env's site-packages."""
    return read_distributions(envprofile.site_packages(env))


def _header(meta: PackageMetadata, key: str) -> str | None:
    """One METADATA header, None when absent (`meta[key]` warns on a missing key)."""
    values = meta.get_all(key)
    return str(values[0]) if values else None


def read_distributions(site: Path) -> dict[str, str]:
    """canonical name -> version of every distribution installed in one site-packages folder
    (importlib.metadata reads their METADATA; a folder without Name or Version is left out)."""
    out: dict[str, str] = {}
    for dist in importlib.metadata.distributions(path=[str(site)]):
        name, version = _header(dist.metadata, "Name"), _header(dist.metadata, "Version")
        if name and version:
            out[str(canonicalize_name(name))] = version
    return dict(sorted(out.items()))


def verify_against_lock(env: Path, state: LockState) -> dict[str, str]:
    """The env's installed distributions, when they are exactly the lock's packages and
    versions; EnvironmentProblem naming every difference otherwise."""
    installed = installed_distributions(env)
    wanted = {str(canonicalize_name(k)): v for k, v in locked_packages(state).items()}
    wrong = [
        f"{name}: locked {version}, installed {installed.get(name, 'nothing')}"
        for name, version in sorted(wanted.items())
        if installed.get(name) != version
    ]
    extra = sorted(set(installed) - set(wanted))
    if wrong or extra:
        raise EnvironmentProblem(
            "the installed packages differ from the lock",
            details=[*wrong, *(f"{name}: installed but not locked" for name in extra)],
        )
    return dict(sorted(installed.items()))
