"""The files of one project on a package index (PEP 691 JSON, else PEP 503 HTML), and the
wheel an installer would pick for the target (CPython X.Y, Linux x86_64, glibc <= host's)."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx
from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from stackgate.lock.wheels import LockedWheel, target_tags

_JSON = "application/vnd.pypi.simple.v1+json"
_ANCHOR = re.compile(r"<a\s[^>]*href=\"([^\"]+)\"[^>]*>", re.IGNORECASE)
_MANYLINUX = re.compile(r"^manylinux_(\d+)_(\d+)_")
_LEGACY = {"manylinux1": 5, "manylinux2010": 12, "manylinux2014": 17}


class IndexError_(Exception):
    """The index could not be read for this project (network, HTTP status, format)."""


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    sha256: str
    size: int | None
    version: Version
    tags: frozenset[Tag]
    yanked: bool = False

    def locked(self, name: str, size: int) -> LockedWheel:
        return LockedWheel(
            canonicalize_name(name), str(self.version), self.url, self.sha256, size, self.filename
        )


@dataclass(frozen=True)
class IndexRow:
    """One file of a project page as the index lists it (any kind: wheel, sdist, JSON)."""

    filename: str
    url: str
    sha256: str | None
    size: int | None
    yanked: bool


def project_rows(client: httpx.Client, index: str, project: str) -> list[IndexRow]:
    """Every file the project page lists, with a file name that is one plain segment."""
    url = f"{index.rstrip('/')}/{canonicalize_name(project)}/"
    try:
        answer = client.get(url, headers={"Accept": f"{_JSON}, text/html;q=0.1"})
    except httpx.HTTPError as exc:
        raise IndexError_(f"{url}: {type(exc).__name__}: {exc}") from None
    if answer.status_code != 200:
        raise IndexError_(f"{url}: HTTP {answer.status_code}")
    kind = answer.headers.get("content-type", "").split(";")[0].strip()
    rows: list[IndexRow] = []
    if kind == _JSON:
        try:
            data = answer.json()
            for f in data["files"]:
                rows.append(
                    IndexRow(
                        f["filename"],
                        urljoin(url, f["url"]),
                        (f.get("hashes") or {}).get("sha256"),
                        f.get("size"),
                        bool(f.get("yanked")),
                    )
                )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise IndexError_(f"{url}: not a PEP 691 page ({exc})") from None
    else:
        for href in _ANCHOR.findall(answer.text):
            target = urljoin(url, html.unescape(href))
            base, _, fragment = target.partition("#")
            sha = fragment[7:] if fragment.startswith("sha256=") else None
            rows.append(IndexRow(urlsplit(base).path.rsplit("/", 1)[-1], base, sha, None, False))
    return [
        r
        for r in rows
        if isinstance(r.filename, str)
        and r.filename
        and not any(c in r.filename for c in "/\\\x00")
        and not r.filename.startswith(".")  # a file name is one plain segment
    ]


def project_files(client: httpx.Client, index: str, project: str) -> list[IndexFile]:
    """Every wheel of `project` with a sha256 on the index (sdists are not judged)."""
    out: list[IndexFile] = []
    for row in project_rows(client, index, project):
        if not row.filename.endswith(".whl") or not row.sha256:
            continue
        try:
            _name, version, _build, tags = parse_wheel_filename(row.filename)
        except InvalidWheelFilename:
            continue
        out.append(
            IndexFile(row.filename, row.url, row.sha256, row.size, version, tags, row.yanked)
        )
    return out


def glibc_minor(platform: str) -> int | None:
    match = _MANYLINUX.match(platform)
    if match:
        return int(match.group(2))
    for legacy, minor in _LEGACY.items():
        if platform.startswith(legacy + "_"):
            return minor
    return None


def best_wheel(
    files: list[IndexFile], version: Version, python: tuple[int, int], glibc: tuple[int, int]
) -> IndexFile | None:
    """The wheel of `version` an installer picks for CPython X.Y on Linux x86_64 with this
    glibc: the most specific compatible tag (abi3 and py3-none count), never a yanked one."""
    rank = {
        tag: i
        for i, tag in enumerate(target_tags(python))
        if (m := glibc_minor(tag.platform)) is None or m <= glibc[1]
    }
    best: tuple[int, IndexFile] | None = None
    for f in files:
        if f.version != version or f.yanked:
            continue
        score = min((rank[t] for t in f.tags if t in rank), default=None)
        if score is not None and (best is None or score < best[0]):
            best = (score, f)
    return best[1] if best else None


def size_of(client: httpx.Client, f: IndexFile) -> int:
    """The file's size (PEP 503 pages do not say it): from a HEAD request."""
    if f.size is not None:
        return f.size
    try:
        answer = client.head(f.url)
        return int(answer.headers["content-length"])
    except (httpx.HTTPError, KeyError, ValueError) as exc:
        raise IndexError_(f"{f.url}: size unknown ({exc})") from None
