"""What an env has installed (stackgate.installed's one reader) and the check that it is
exactly what uv installs from its lock for it (stackgate.installed's one rule, against
stackgate.lock.install's walk of the lock: a package the lock holds for another interpreter or
platform is not expected)."""

from __future__ import annotations

from pathlib import Path

from builder.venv import envprofile
from stackgate.errors import EnvironmentProblem
from stackgate.installed import lock_differences
from stackgate.installed import read_distributions as read_site
from stackgate.lock.install import env_markers, env_python_version, installed_set
from stackgate.lock.state import LockState


def read_distributions(site: Path) -> dict[str, str]:
    """canonical name -> version of every distribution installed in one site-packages folder."""
    return {key: dist.version for key, dist in read_site(site).items()}


def installed_distributions(env: Path) -> dict[str, str]:
    """canonical name -> version of every *.dist-info in the env's site-packages."""
    return read_distributions(envprofile.site_packages(env))


def verify_against_lock(env: Path, state: LockState) -> dict[str, str]:
    """The env's installed distributions, when they are exactly the packages and versions uv
    installs from the lock for the env's Python on this host; EnvironmentProblem naming every
    difference otherwise."""
    installed = installed_distributions(env)
    locked = installed_set(state.lock, env_markers(env_python_version(env)))
    diff = lock_differences(installed, locked)
    wrong = [
        *(f"{name}: locked {', '.join(v)}, installed {have}" for name, v, have in diff.mismatched),
        *(f"{name}: locked {', '.join(v)}, installed nothing" for name, v in diff.not_installed),
    ]
    if not diff.exact():
        raise EnvironmentProblem(
            "the installed packages differ from the lock",
            details=[
                *sorted(wrong),
                *(f"{name}: installed but not locked" for name in diff.not_locked),
            ],
        )
    return dict(sorted(installed.items()))
