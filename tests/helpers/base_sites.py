"""Stand-ins for a machine image's site-packages (a `--base-site`) on a host without one.

A record made over a base site names what that folder held (distribution -> version; later
records also each RECORD's sha256). These folders hold only the dist-info METADATA of those
distributions: enough for stackgate's identity check and for the tree comparison (the base
site's files are not part of the env tree), not for importing anything from them. They stand
for the real image's site-packages, which exists only on the lent GPU machines.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path


def synthetic_base_site(root: Path, packages: Mapping[str, str], minor: str = "3.12") -> Path:
    """root/lib/pythonX.Y/site-packages with one METADATA-only dist-info per package."""
    site = root / "lib" / f"python{minor}" / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    for name, version in packages.items():
        dist_info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        dist_info.mkdir(exist_ok=True)
        (dist_info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8"
        )
    return site


def record_base_site(record: Path, root: Path, **change: str) -> Path:
    """A stand-in for the base site a committed record (its JSON file) was built over, with
    the versions of `change` in place of the recorded ones."""
    raw = json.loads(record.read_text())["build"]["raw"]["base_site"]
    return synthetic_base_site(root, {**raw["packages"], **change})
