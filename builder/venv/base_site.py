"""Layer a built venv over another Python's site-packages through one `.pth` line.

For hosts whose big packages (a vendor PyTorch, transformers) come preinstalled and cannot be
downloaded again (no index reachable), the builder installs the stack's lock into its own venv
as usual and appends the host's site-packages to `sys.path` after the venv's own: the venv's
locked packages win, the rest is imported from the host. The build record says so
(`base_site`: the folder and every distribution found there), so a record made from such an
env never claims those packages were built or locked.
"""

from __future__ import annotations

from pathlib import Path

from builder.venv import envprofile
from stackgate.base_site_identity import site_identity
from stackgate.build_record import BaseSite
from stackgate.env_generated import BASE_SITE_PTH
from stackgate.errors import BadInput


def check_base_site(path: Path, python_version: str) -> Path:
    """The folder, resolved; BadInput when it is no site-packages of the env's Python X.Y."""
    folder = path.resolve()
    if not folder.is_dir():
        raise BadInput(f"--base-site {path}: no such folder")
    xy = ".".join(python_version.split(".")[:2])
    if f"python{xy}" not in folder.parts:
        raise BadInput(
            f"--base-site {path}: not a python{xy} site-packages folder (the env's Python is "
            f"{python_version}); extension modules built for another Python would not load"
        )
    return folder


def layer(env: Path, folder: Path) -> BaseSite:
    """Write the .pth into the env and describe what it brings in."""
    site = envprofile.site_packages(env)
    (site / BASE_SITE_PTH).write_text(f"{folder}\n", encoding="utf-8")
    versions, records = site_identity(folder)
    return BaseSite(path=str(folder), pth=BASE_SITE_PTH, packages=versions, records_sha256=records)
