"""What a base site (another Python's site-packages an env is layered over) is, and whether a
folder on this host is the one a build record names.

A base site is a host input: its path is where one machine keeps it, not part of what was
proven. What was proven over it is its content, recorded as each distribution's version and
the sha256 of its dist-info RECORD (the file hashes the installer wrote), so a new host's
folder, wherever it lives, is checked against that.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from stackgate.installed import read_distributions


def site_identity(folder: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(canonical name -> version, canonical name -> sha256 of its RECORD) of one folder;
    a distribution without a readable RECORD has no entry in the second map."""
    versions: dict[str, str] = {}
    records: dict[str, str] = {}
    for key, dist in read_distributions(folder).items():
        versions[key] = dist.version
        try:
            records[key] = hashlib.sha256((dist.dist_info / "RECORD").read_bytes()).hexdigest()
        except OSError:
            continue
    return versions, records


@dataclass
class SiteComparison:
    """How a folder here differs from a recorded base site (empty lists: the same)."""

    changed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    files_differ: list[str] = field(default_factory=list)
    compared_files: bool = False

    @property
    def same(self) -> bool:
        return not (self.changed or self.missing or self.added or self.files_differ)

    def lines(self, limit: int = 8) -> list[str]:
        out = [f"{c}" for c in self.changed[:limit]]
        if self.missing:
            out.append(f"{len(self.missing)} missing here: {', '.join(self.missing[:limit])}")
        if self.added:
            out.append(f"{len(self.added)} not in the record: {', '.join(self.added[:limit])}")
        if self.files_differ:
            out.append(
                f"{len(self.files_differ)} with other files (RECORD sha256) at the same "
                f"version: {', '.join(self.files_differ[:limit])}"
            )
        return out


def compare_site(
    recorded_versions: Mapping[str, str],
    recorded_records: Mapping[str, str],
    here_versions: Mapping[str, str],
    here_records: Mapping[str, str],
) -> SiteComparison:
    out = SiteComparison(compared_files=bool(recorded_records))
    for key in sorted(set(recorded_versions) | set(here_versions)):
        want, have = recorded_versions.get(key), here_versions.get(key)
        if have is None:
            out.missing.append(f"{key} {want}")
        elif want is None:
            out.added.append(f"{key} {have}")
        elif want != have:
            out.changed.append(f"{key}: recorded {want}, here {have}")
        elif key in recorded_records and recorded_records[key] != here_records.get(key):
            out.files_differ.append(f"{key} {have}")
    return out
