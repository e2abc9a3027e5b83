"""Each locked artifact must come from the index the manifest names for its package (or a
mirror the user mapped), checked before anything is downloaded.

A uv.lock is input: an edited entry can name any URL with that file's own correct sha256 (a
wheel on another host, same version, planted code), and `uv sync --frozen` installs it. Two
checks, in this order:

1. The registry: a package the manifest pins to an index (`[packages.X] index = "N"`) must be
   locked from index N (its manifest URL, or the URL `--index-map N=...` mapped it to, at lock
   time or now); every other package from one of the manifest's open (non-explicit) indexes.
   A dependency from a direct URL, a local path or folder (nothing a manifest can name) is
   refused; a git source must be the manifest's repository (or its mapped mirror). No network.
2. The listing (`listing=True`): every wheel and sdist of a registry package must be a file
   the index's own page for the package lists (PEP 691 JSON or PEP 503 HTML, over the bounded
   reader; a file:// index's `index.html` from disk), and where the page gives a sha256 it must
   be the lock's. So PyPI's files on files.pythonhosted.org pass and a file on any other host
   does not, without a list of hosts.

A lock that fails is bad input (exit 2) naming the lock, the package and the file; an index
page that cannot be read is an environment problem (exit 3) naming the index.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

import httpx
from packaging.utils import canonicalize_name

from stackgate.bounded_http import Budget, LimitExceeded, get, make_client
from stackgate.credentials import index_env_names, strip_credentials
from stackgate.errors import BadInput, EnvironmentProblem
from stackgate.files import read_bytes_bounded
from stackgate.lock.state import LockState
from stackgate.lock.uvlock import LockedFile, LockedPackage
from stackgate.manifest import Manifest, Package
from stackgate.paths import display_path

MAX_PAGE_BYTES = 64 << 20  # torch's PyPI page (JSON) is ~1 MB
PAGE_WORKERS = 8
_ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.2"


def normal_url(url: str, base: Path) -> str:
    """An index or file location as one comparable string: a URL without credentials,
    fragment or trailing slash, scheme and host lower-cased; a path (uv writes local indexes
    as paths) as the file:// URL of its absolute form (relative to `base`)."""
    if "://" not in url:
        local = Path(url) if Path(url).is_absolute() else base / url
        return local.resolve().as_uri().rstrip("/")
    clean = strip_credentials(url)[0]
    parts = urlsplit(clean)
    path = parts.path.rstrip("/")
    if parts.scheme == "file":
        return Path(unquote(path)).resolve().as_uri().rstrip("/")
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), unquote(path), parts.query, ""))


def url_problem(url: str) -> str:
    """Why uv and this check could read a lock's URL as two places ("" when they cannot).

    uv parses URLs as WHATWG does (Rust's url crate), Python's urlsplit does not: in
    `https://evil.example\\@pypi.org/simple` uv reads a backslash as `/` (host evil.example),
    urlsplit as part of the user info (host pypi.org). uv never writes user info, control
    characters, a non-ASCII or percent-encoded host into a lock, so such a URL is refused
    rather than interpreted."""
    if "\\" in url:
        return "a backslash (uv reads it as '/', Python's parser as part of the user info)"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        return "a control character (uv drops tabs and newlines, Python may not)"
    if "://" in url:
        if " " in url:
            return "a space (uv writes URLs percent-encoded)"
        netloc = urlsplit(url).netloc
        if "@" in netloc:
            return "user info before the host (uv writes none into a lock)"
        if not netloc.isascii():
            return "a host that is not ASCII (uv would look up its punycode form)"
        if "%" in netloc:
            return "a percent-encoded host (uv decodes it, Python's parser does not)"
    return ""


@dataclass(frozen=True)
class _Index:
    name: str
    urls: frozenset[str]  # normalized: the manifest's URL and the mapped ones


def _indexes(manifest: Manifest, mappings: Sequence[Mapping[str, str]], base: Path) -> list[_Index]:
    out: list[_Index] = []
    for name, index in manifest.indexes.items():
        urls = {normal_url(index.url, base)}
        urls |= {normal_url(m[name], base) for m in mappings if name in m}
        out.append(_Index(name, frozenset(urls)))
    return out


def _allowed(manifest: Manifest, indexes: list[_Index], package: str) -> list[_Index]:
    key = canonicalize_name(package)
    pins = {canonicalize_name(n): p for n, p in manifest.packages.items()}
    pin = pins.get(key)
    if pin is not None and pin.index is not None:
        return [i for i in indexes if i.name == pin.index]
    return [i for i in indexes if not manifest.indexes[i.name].explicit]


def registry_problems(
    manifest: Manifest, state: LockState, extra_map: Mapping[str, str] | None = None
) -> list[str]:
    """One line per locked package whose source the manifest does not name."""
    base = state.files.folder
    mappings = [state.index_map, dict(extra_map or {})]
    indexes = _indexes(manifest, mappings, base)
    pins: dict[str, Package] = {canonicalize_name(n): p for n, p in manifest.packages.items()}
    out: list[str] = []
    for pkg in state.lock.dependencies():
        label = f"{pkg.name} {pkg.version or ''}".strip()
        source = pkg.source
        odd = [
            f"{label}: {where} {shown!r}: {why}"
            for where, shown in _urls(pkg)
            if (why := url_problem(shown))
        ]
        if odd:
            out.extend(odd)
            continue
        if source.registry is not None:
            allowed = _allowed(manifest, indexes, pkg.name)
            got = normal_url(source.registry, base)
            if not any(got in i.urls for i in allowed):
                names = ", ".join(f"'{i.name}' ({sorted(i.urls)[0]})" for i in allowed) or "none"
                out.append(f"{label}: locked from index {got}; the manifest allows {names}")
        elif source.git is not None:
            pin = pins.get(pkg.key)
            repo = (source.git_commit() or ("", ""))[0]
            wanted = set()
            if pin is not None and pin.git is not None:
                wanted = {normal_url(pin.git, base)}
                wanted |= {
                    normal_url(m[n], base)
                    for m in mappings
                    for n in m
                    if pins.get(canonicalize_name(n)) is pin
                }
            if normal_url(repo, base) not in wanted:
                out.append(
                    f"{label}: locked from git {repo}; the manifest names no such repository"
                )
        else:
            out.append(
                f"{label}: a {source.kind} source ({source.location}); a manifest names only "
                "indexes and git repositories"
            )
    return out


def _urls(pkg: LockedPackage) -> list[tuple[str, str]]:
    """Every URL of a locked package uv may read: its source's, its files'."""
    source = pkg.source
    found = [("source", u) for u in (source.registry, source.git, source.url) if u is not None]
    found += [(f"wheels[{j}]", w.url) for j, w in enumerate(pkg.wheels) if w.url is not None]
    if pkg.sdist is not None and pkg.sdist.url is not None:
        found.append(("sdist", pkg.sdist.url))
    return found


@dataclass(frozen=True)
class _File:
    package: LockedPackage
    entry: LockedFile
    url: str  # normalized
    where: str


def _files(state: LockState) -> dict[tuple[str, str], list[_File]]:
    """Registry files by (normalized registry, canonical package)."""
    base = state.files.folder
    out: dict[tuple[str, str], list[_File]] = {}
    for pkg in state.lock.dependencies():
        if pkg.source.registry is None:
            continue
        registry = normal_url(pkg.source.registry, base)
        entries = [(f"wheels[{j}]", w) for j, w in enumerate(pkg.wheels)]
        if pkg.sdist is not None:
            entries.append(("sdist", pkg.sdist))
        for where, entry in entries:
            location = entry.url if entry.url is not None else (entry.path or "")
            out.setdefault((registry, pkg.key), []).append(
                _File(pkg, entry, normal_url(location, base), where)
            )
    return out


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.hrefs.append(href)


def file_name(url: str) -> str:
    """A URL's last path segment, query and fragment dropped and percent-encoding undone: the
    same for a URL and its normal_url form (over http; a file:// URL's resolve() may follow a
    link to another name)."""
    path = url.split("#", 1)[0].split("?", 1)[0].rstrip("/")
    name = path.rsplit("/", 1)[-1]
    return unquote(name) if "%" in name else name


def parse_page(
    body: bytes, page_url: str, content_type: str, names: Collection[str] | None = None
) -> dict[str, str | None]:
    """normalized file URL -> sha256 (None where the page gives none). names: the file names
    (file_name) the caller looks for; over http only those entries are normalized (PyPI's
    pages list far more files than a lock wants, benchmarks/builder/results/build_vs_sync.md),
    the others cannot equal a wanted URL."""
    listed: dict[str, str | None] = {}
    wanted = None if names is None or page_url.startswith("file:") else frozenset(names)
    text = body.decode("utf-8", "replace")
    if "json" in content_type:
        data = json.loads(text)
        files = data.get("files", []) if isinstance(data, dict) else []
        for item in files if isinstance(files, list) else []:
            if not isinstance(item, dict) or not isinstance(item.get("url"), str):
                continue
            if wanted is not None and file_name(item["url"]) not in wanted:
                continue
            hashes = item.get("hashes")
            sha = hashes.get("sha256") if isinstance(hashes, dict) else None
            url = urljoin(page_url, item["url"])
            listed[normal_url(url, Path("/"))] = sha if isinstance(sha, str) else None
        return listed
    parser = _Links()
    parser.feed(text)
    for href in parser.hrefs:
        if wanted is not None and file_name(href) not in wanted:
            continue
        url = urljoin(page_url, href)
        fragment = urlsplit(url).fragment
        sha = fragment.removeprefix("sha256=") if fragment.startswith("sha256=") else None
        listed[normal_url(url, Path("/"))] = sha
    return listed


def _auth(manifest: Manifest, registry: str, state: LockState) -> httpx.Auth | None:
    """Basic auth for an index whose credentials uv would read from UV_INDEX_<NAME>_*."""
    import os

    base = state.files.folder
    for index in _indexes(manifest, [state.index_map], base):
        if registry in index.urls:
            user_var, pass_var = index_env_names(index.name)
            user, password = os.environ.get(user_var), os.environ.get(pass_var)
            if user is not None or password is not None:
                return httpx.BasicAuth(user or "", password or "")
    return None


def _page(
    manifest: Manifest,
    state: LockState,
    registry: str,
    package: str,
    client: httpx.Client,
    budget: Budget,
    names: Collection[str] | None = None,
) -> dict[str, str | None]:
    page_url = f"{registry}/{package}/"
    if registry.startswith("file://"):
        folder = Path(unquote(urlsplit(registry).path)) / package
        try:
            body = read_bytes_bounded(folder / "index.html", MAX_PAGE_BYTES)
        except (OSError, BadInput) as exc:
            raise EnvironmentProblem(
                f"index {registry} cannot be read for {package}'s page: {exc}",
                details=[
                    str(folder / "index.html"),
                    "remap the index to a reachable mirror with --index-map NAME=URL",
                ],
            ) from None
        return parse_page(body, folder.as_uri() + "/", "text/html")
    try:
        with get(
            client,
            page_url,
            budget,
            max_bytes=MAX_PAGE_BYTES,
            expect_bytes=1 << 20,
            headers={"Accept": _ACCEPT},
            auth=_auth(manifest, registry, state),
        ) as answer:
            if answer.status_code != 200:
                raise EnvironmentProblem(
                    f"index {registry} answers HTTP {answer.status_code} for {package}'s page: "
                    "cannot check where its locked files come from",
                    details=[page_url],
                )
            body = answer.read()
            final = answer.final_url
            kind = answer.headers.get("content-type", "")
    except LimitExceeded as exc:
        raise EnvironmentProblem(f"index page {page_url}: {exc.reason}") from None
    except httpx.HTTPError as exc:
        raise EnvironmentProblem(
            f"index {registry} cannot be read for {package}'s page: {exc}", details=[page_url]
        ) from None
    try:
        return parse_page(body, final, kind, names)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError
        raise EnvironmentProblem(f"index page {page_url} is not a simple-API page: {exc}") from None


def listing_problems(
    manifest: Manifest,
    state: LockState,
    client: httpx.Client,
    budget: Budget,
    *,
    network: bool = True,
) -> list[str]:
    """One line per registry file its index does not list (or lists with another sha256).
    Without `network` only file:// indexes are read (their pages are on disk)."""
    groups = {
        key: files
        for key, files in _files(state).items()
        if network or key[0].startswith("file://")
    }

    def one(key: tuple[str, str]) -> list[str]:
        registry, package = key
        names = {file_name(item.url) for item in groups[key]}
        listed = _page(manifest, state, registry, package, client, budget, names)
        out: list[str] = []
        for item in groups[key]:
            label = f"{item.package.name} {item.package.version or ''}".strip()
            if item.url not in listed:
                out.append(
                    f"{label}: {item.where} {item.url} is not a file index {registry} lists "
                    f"for {package}"
                )
                continue
            sha = listed[item.url]
            pinned = (item.entry.hash or "").removeprefix("sha256:")
            if sha is not None and sha != pinned:
                out.append(
                    f"{label}: {item.where}: the index lists sha256 {sha}, the lock pins {pinned}"
                )
        return out

    with ThreadPoolExecutor(max_workers=PAGE_WORKERS) as pool:
        return [line for lines in pool.map(one, sorted(groups)) for line in lines]


def check_origins(
    manifest: Manifest,
    state: LockState,
    *,
    listing: bool,
    network: bool = True,
    extra_map: Mapping[str, str] | None = None,
    client: httpx.Client | None = None,
    budget: Budget | None = None,
) -> None:
    """Refuse (BadInput) a lock with an artifact from anywhere but its manifest's index:
    the registry check always, the listing check when `listing` (index pages over the network
    only with `network`)."""
    wrong = registry_problems(manifest, state, extra_map)
    if not wrong and listing:
        wrong = _listed(manifest, state, network=network, client=client, budget=budget)
    _refuse(state, wrong)


def check_listing(
    manifest: Manifest,
    state: LockState,
    *,
    network: bool = True,
    client: httpx.Client | None = None,
    budget: Budget | None = None,
) -> None:
    """The listing check alone (BadInput as check_origins words it): for a caller that ran
    the registry check already and reads the index pages later (builder.venv.origin_ahead)."""
    _refuse(state, _listed(manifest, state, network=network, client=client, budget=budget))


def _listed(
    manifest: Manifest,
    state: LockState,
    *,
    network: bool,
    client: httpx.Client | None,
    budget: Budget | None,
) -> list[str]:
    run = budget or Budget(what="the origin check")
    if client is not None:
        return listing_problems(manifest, state, client, run, network=network)
    with make_client(run.limits) as own:
        return listing_problems(manifest, state, own, run, network=network)


def _refuse(state: LockState, wrong: list[str]) -> None:
    if wrong:
        more = [f"... and {len(wrong) - 20} more"] if len(wrong) > 20 else []
        raise BadInput(
            f"{display_path(state.files.lockfile)}: {len(wrong)} locked artifacts do not come "
            "from the index the manifest names for their package",
            details=[*wrong[:20], *more],
        )
