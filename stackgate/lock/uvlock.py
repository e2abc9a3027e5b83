"""A typed reader for uv.lock: the one place its TOML is parsed.

Only the fields stackgate reads are modelled; uv adds fields between releases
(resolution-markers, dependencies, metadata, upload-time, ...), so these models ignore keys
they do not know instead of failing on a newer uv (the one place `extra="ignore"` is used:
we do not own this format). A missing or wrongly-typed field we do read is BadInput naming
the file.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version
from pydantic import ConfigDict, Field

from stackgate.errors import BadInput
from stackgate.files import read_text_bounded
from stackgate.model import StrictModel, parsed


class _LockModel(StrictModel):
    # strict: a lock is TOML, whose types are exact; `version = "1"` or `size = "12"` is not a
    # lock uv wrote, and coercing it let stackgate read what uv then refused (exit 3, not 2).
    model_config = ConfigDict(extra="ignore", strict=True)


class LockedFile(_LockModel):
    """An sdist or wheel: remote files by `url`, files of a local (file://) index by `path`."""

    url: str | None = None
    path: str | None = None
    hash: str | None = None
    size: int | None = None

    @property
    def location(self) -> str:
        if self.url is not None:
            return self.url
        return Path(self.path or "").resolve().as_uri()

    @property
    def filename(self) -> str:
        return self.location.rsplit("/", 1)[-1]


# A file name a folder can hold as is: no separator, no NUL or control character, no leading
# dot; the characters of wheel and sdist names (PEP 427/625) plus `+` (local versions) and `!`.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+!-]*")


def artifact_name(entry: LockedFile, package: str, version: str | None, *, where: str) -> str:
    """The file name of a locked wheel or sdist, validated: the last path segment of its URL
    (or path), percent-decoded, must be a plain file name and a wheel or sdist name of this
    package and version. Every destination and message uses this name, never the raw URL
    (`.../%2Ftmp%2FPWNED?x/pkg-0.2.0-py3-none-any.whl` named /tmp/PWNED). BadInput
    names `where` (the lock file and field)."""
    raw = entry.url if entry.url is not None else (entry.path or "")
    parts = urlsplit(raw) if entry.url is not None else None
    path = parts.path if parts is not None else raw
    segment = path.rsplit("/", 1)[-1]
    if re.search(r"%(2f|5c|00)", segment, re.IGNORECASE):
        raise BadInput(f"{where}: {raw!r}: an encoded separator or NUL in the file name")
    name = unquote(segment)
    if not _PLAIN_NAME.fullmatch(name) or name in {".", ".."}:
        raise BadInput(f"{where}: {raw!r}: {name!r} is not a plain wheel or sdist file name")
    try:
        if name.endswith(".whl"):
            got_name, got_version, _build, _tags = parse_wheel_filename(name)
        else:
            got_name, got_version = parse_sdist_filename(name)
    except (InvalidWheelFilename, InvalidSdistFilename) as exc:
        raise BadInput(f"{where}: {raw!r}: not a wheel or sdist name: {exc}") from None
    if got_name != canonicalize_name(package):
        raise BadInput(f"{where}: {raw!r}: a file of {got_name}, not of {package}")
    if version is not None:
        try:
            same = got_version == Version(version)
        except InvalidVersion:
            same = str(got_version) == version
        if not same:
            raise BadInput(f"{where}: {raw!r}: version {got_version}, the lock says {version}")
    return name


class LockSource(_LockModel):
    registry: str | None = None
    git: str | None = None
    url: str | None = None
    path: str | None = None
    directory: str | None = None
    editable: str | None = None
    virtual: str | None = None

    @property
    def is_project(self) -> bool:
        """The lock's own (virtual or editable) project, not a dependency."""
        return self.virtual is not None or self.editable is not None

    @property
    def kind(self) -> str:
        for name in ("registry", "git", "url", "path", "directory", "editable", "virtual"):
            if getattr(self, name) is not None:
                return name
        return "unknown"

    @property
    def location(self) -> str:
        return str(getattr(self, self.kind, None) or "")

    def git_commit(self) -> tuple[str, str] | None:
        """(repository URL, commit) of a git source: uv writes `<url>?rev=..#<commit>`."""
        if self.git is None:
            return None
        base, _, commit = self.git.partition("#")
        parts = urlsplit(base)
        query = parse_qs(parts.query)
        url = parts._replace(query="", fragment="").geturl()
        return url, commit or query.get("rev", [""])[0]


class LockedDependency(_LockModel):
    """One edge of the lock's graph: a package needs `name` (at `version` where the lock holds
    several), with `extra`, where `marker` holds (None: always)."""

    name: str
    version: str | None = None
    marker: str | None = None
    extra: list[str] = Field(default_factory=list)


class LockedPackage(_LockModel):
    name: str
    version: str | None = None
    source: LockSource = Field(default_factory=LockSource)
    sdist: LockedFile | None = None
    wheels: list[LockedFile] = Field(default_factory=list)
    dependencies: list[LockedDependency] = Field(default_factory=list)
    optional_dependencies: dict[str, list[LockedDependency]] = Field(
        default_factory=dict, alias="optional-dependencies"
    )
    dev_dependencies: dict[str, list[LockedDependency]] = Field(
        default_factory=dict, alias="dev-dependencies"
    )

    @property
    def key(self) -> str:
        return canonicalize_name(self.name)


class UvLock(_LockModel):
    version: int = Field(ge=1)
    requires_python: str | None = Field(default=None, alias="requires-python")
    package: list[LockedPackage] = Field(default_factory=list)

    def dependencies(self) -> list[LockedPackage]:
        """Every locked package but the lock's own project."""
        return [p for p in self.package if not p.source.is_project]

    def versions(self) -> dict[str, str]:
        """name -> version of every dependency (as uv spells the name)."""
        return {p.name: p.version or "" for p in self.dependencies()}

    def by_name(self) -> dict[str, list[LockedPackage]]:
        """Dependencies by canonical name (a universal lock may hold several versions)."""
        out: dict[str, list[LockedPackage]] = {}
        for pkg in self.dependencies():
            if pkg.version is not None:
                out.setdefault(pkg.key, []).append(pkg)
        return out

    def find(self, name: str) -> LockedPackage | None:
        key = canonicalize_name(name)
        return next((p for p in self.package if p.key == key), None)


MAX_LOCK_BYTES = 64 << 20  # the cu128 lock is ~0.4 MB


def parse_uv_lock(text: str, *, where: str) -> UvLock:
    try:
        data = tomllib.loads(text)
    except ValueError as exc:  # TOMLDecodeError, or an integer past 4,300 digits
        raise BadInput(f"{where}: not valid TOML: {exc}") from None
    except RecursionError:
        raise BadInput(f"{where}: not valid TOML: nested too deeply") from None
    return parsed(UvLock, data, f"{where}: not a uv.lock stackgate can read")


def read_uv_lock(path: Path) -> UvLock:
    """A regular UTF-8 file of at most MAX_LOCK_BYTES holding a uv.lock; else BadInput."""
    return parse_uv_lock(read_text_bounded(path, MAX_LOCK_BYTES), where=str(path))
