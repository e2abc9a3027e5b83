"""Typed ABI findings: what the resolver found, kept as objects until the report prints them.

`MissingSymbol`, `MissingSoname`, `MissingVersion` are the raw findings of one resolution;
`PackageFindings` groups them by owning distribution, the unit a verdict is given for.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class MissingSymbol:
    importer: Path
    root: Path
    symbol: str
    version: str | None
    expected_from: str | None  # soname expected to provide it (verneed file or nearest name)
    expected_path: Path | None = None
    near_misses: tuple[str, ...] = ()  # what that library exports under the same name
    version_file: str | None = None  # the soname its version requirement names


@dataclass(frozen=True)
class MissingSoname:
    requester: Path
    soname: str
    host_provided: bool
    # the env ships the file (nvidia/*/lib), but nothing on the requester's load path reaches it
    installed_at: Path | None = None


@dataclass(frozen=True)
class MissingVersion:
    requester: Path
    provider: Path
    version: str


@dataclass(frozen=True)
class ScopeResolved:
    """A symbol outside the object's DT_NEEDED closure that its package's scope provides."""

    importer: Path
    symbol: str
    provider: Path


Finding = MissingSymbol | MissingSoname | MissingVersion


class Owners(Protocol):
    def owner_label(self, path: Path) -> str: ...


@dataclass
class PackageFindings:
    """Everything found for one distribution (label: "name version" or "(no distribution ...)")."""

    label: str
    extensions: int = 0
    symbols: list[MissingSymbol] = field(default_factory=list)
    sonames: list[MissingSoname] = field(default_factory=list)
    versions: list[MissingVersion] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.symbols or self.sonames or self.versions)

    def absent_sonames(self) -> set[str]:
        return {m.soname for m in self.sonames}


def by_package(
    owners: Owners,
    extensions: Iterable[Path],
    symbols: Iterable[MissingSymbol],
    sonames: Iterable[MissingSoname],
    versions: Iterable[MissingVersion],
) -> dict[str, PackageFindings]:
    """Group findings by the distribution owning the object that has the problem. Sonames the
    host provides (the driver's) are left out: their absence is not the env's fault."""
    out: dict[str, PackageFindings] = {}

    def get(path: Path) -> PackageFindings:
        label = owners.owner_label(path)
        found = out.get(label)
        if found is None:
            found = out[label] = PackageFindings(label)
        return found

    for ext in extensions:
        get(ext).extensions += 1
    for sym in symbols:
        get(sym.importer).symbols.append(sym)
    for so in sonames:
        if not so.host_provided:
            get(so.requester).sonames.append(so)
    for ver in versions:
        get(ver.requester).versions.append(ver)
    return dict(sorted(out.items()))
