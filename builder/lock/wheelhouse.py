"""Download every artifact the lock pins for the stack's target into one folder, hash-checked,
so `build --offline --wheelhouse DIR` can reproduce the env with no network (a GPU host that
reaches no registry, an air-gapped site).

"Every artifact for the target": of each locked registry package, the wheels whose tags the
target (the manifest's Python minor, CPython, its platform) can install; the sdist only where
no wheel fits. Files are written as `<name>.part` and renamed after their sha256 matched the
lock; an existing file with the right hash is kept (re-runs resume).

The lock is input: every file name is the validated wheel/sdist name
(`stackgate.lock.uvlock.artifact_name`), never a piece of the URL; every artifact must be one the
index the manifest names for its package lists, with the lock's sha256
(`builder.lock.origin`), checked before the first byte is downloaded; every download goes
through the bounded reader (`stackgate.bounded_http`): at most the lock's size, within a
deadline per file and one for the whole wheelhouse.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import parse_wheel_filename

from builder.lock.origin import check_origins
from stackgate import dirfd
from stackgate.bounded_http import Budget, LimitExceeded, Limits, get, make_client
from stackgate.credentials import redact
from stackgate.errors import BadInput, EnvironmentProblem
from stackgate.lock.state import LockState
from stackgate.lock.uvlock import LockedFile, artifact_name
from stackgate.manifest import Manifest
from stackgate.paths import display_path

MANIFEST_NAME = "wheelhouse.json"
_MAX_GLIBC_MINOR = 40
MAX_UNSIZED = 8 << 30  # an artifact whose size the lock does not give (flat/local indexes)
UNSIZED_EXPECTED = 1 << 30  # its request's deadline: this many bytes at the minimum rate


@dataclass(frozen=True)
class Artifact:
    package: str
    version: str
    url: str
    sha256: str
    size: int | None
    registry: str
    filename: str  # validated (artifact_name): the only name written in the wheelhouse


def target_tags(manifest: Manifest) -> set[Tag]:
    major, minor = (int(x) for x in manifest.python.split("."))
    arch = manifest.platform.split("-", 1)[1]
    platforms = [f"manylinux_2_{m}_{arch}" for m in range(_MAX_GLIBC_MINOR, 4, -1)]
    platforms += [f"manylinux2014_{arch}", f"linux_{arch}"]
    if arch == "x86_64":
        platforms += ["manylinux2010_x86_64", "manylinux1_x86_64"]
    tags = set(cpython_tags((major, minor), platforms=platforms))
    tags |= set(compatible_tags((major, minor), f"cp{major}{minor}", platforms=platforms))
    return tags


def _hash(entry: LockedFile) -> str:
    value = entry.hash or ""
    if not value.startswith("sha256:"):
        raise EnvironmentProblem(f"{entry.location}: the lock has no sha256 for it")
    return value.removeprefix("sha256:")


def artifacts(state: LockState, manifest: Manifest) -> tuple[list[Artifact], list[str]]:
    """(artifacts to fetch, packages that cannot be fetched: git or path sources)."""
    tags = target_tags(manifest)
    out: list[Artifact] = []
    skipped: list[str] = []
    lockfile = display_path(state.files.lockfile)
    for pkg in state.lock.dependencies():
        name, version = pkg.name, pkg.version or ""
        registry = pkg.source.registry
        if registry is None:
            skipped.append(f"{name} ({pkg.source.kind} source)")
            continue
        where = f"{lockfile}: package {name} {version}"
        chosen: list[tuple[LockedFile, str]] = []
        for j, wheel in enumerate(pkg.wheels):
            filename = artifact_name(wheel, name, pkg.version, where=f"{where}: wheels[{j}]")
            _, _, _, wheel_tags = parse_wheel_filename(filename)
            if wheel_tags & tags:
                chosen.append((wheel, filename))
        if pkg.sdist is not None:  # validated whether or not it is fetched
            sdist = artifact_name(pkg.sdist, name, pkg.version, where=f"{where}: sdist")
            if not chosen:
                chosen = [(pkg.sdist, sdist)]
        for entry, filename in chosen:
            art = Artifact(
                name, version, entry.location, _hash(entry), entry.size, registry, filename
            )
            out.append(art)
    return out, skipped


Progress = Callable[[Artifact, int], None]


def _kept_digest(dest_fd: int, name: str) -> tuple[str, int] | None:
    """(sha256, size) of the regular file `name` in the opened wheelhouse (no symlink)."""
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dest_fd
        )
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        return hashlib.file_digest(handle, "sha256").hexdigest(), info.st_size


@contextlib.contextmanager
def _source(art: Artifact, client: httpx.Client, budget: Budget) -> Iterator[Iterable[bytes]]:
    """The artifact's bytes, at most the lock's size: read from a file:// index or downloaded
    through the bounded reader."""
    limit = art.size if art.size is not None else MAX_UNSIZED
    parts = urlsplit(art.url)
    if parts.scheme == "file":
        with Path(unquote(parts.path)).open("rb") as src:
            yield _at_most(iter(lambda: src.read(1 << 20), b""), art.url, limit)
        return
    with get(
        client,
        art.url,
        budget,
        max_bytes=limit,
        expect_bytes=art.size if art.size is not None else UNSIZED_EXPECTED,
        limit_text=f"the lock's size, {limit} bytes"
        if art.size is not None
        else f"{limit} bytes for a file the lock gives no size",
    ) as answer:
        if answer.status_code != 200:
            raise EnvironmentProblem(
                f"cannot download {art.filename} from index {art.registry}: "
                f"HTTP {answer.status_code}",
                details=[art.url],
            )
        yield answer.chunks()


def _at_most(chunks: Iterable[bytes], url: str, limit: int) -> Iterator[bytes]:
    got = 0
    for chunk in chunks:
        got += len(chunk)
        if got > limit:
            raise LimitExceeded(url, f"the file runs past {limit} bytes")
        yield chunk


def _fetch(
    art: Artifact, dest_fd: int, client: httpx.Client, budget: Budget, progress: Progress
) -> bool:
    """Fetch one artifact into the opened wheelhouse `dest_fd` (every name is relative to it:
    the folder swapped for a symlink mid-download writes nothing through the link); True when
    downloaded, False when an identical copy was kept."""
    kept = _kept_digest(dest_fd, art.filename)
    if kept is not None and kept[0] == art.sha256:
        progress(art, art.size or kept[1])
        return False
    part_name = art.filename + ".part"

    def drop_part() -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(part_name, dir_fd=dest_fd)

    digest = hashlib.sha256()
    try:
        # a `.part` left behind (or planted: a symlink) is removed, never written through
        drop_part()
        fd = os.open(part_name, dirfd.FILE_FLAGS, 0o644, dir_fd=dest_fd)
        with os.fdopen(fd, "wb") as out, _source(art, client, budget) as chunks:
            for chunk in chunks:
                digest.update(chunk)
                out.write(chunk)
                progress(art, len(chunk))
    except LimitExceeded as exc:
        drop_part()
        raise EnvironmentProblem(
            f"{art.filename} ({art.package} {art.version}): {exc.reason}", details=[art.url]
        ) from None
    except (httpx.HTTPError, OSError) as exc:
        drop_part()
        raise EnvironmentProblem(
            f"cannot download {art.filename} from index {art.registry}: {exc}",
            details=[art.url],
        ) from None
    except BaseException:
        drop_part()
        raise
    if digest.hexdigest() != art.sha256:
        drop_part()
        raise EnvironmentProblem(
            f"hash mismatch for {art.filename}: got sha256 {digest.hexdigest()}, "
            f"the lock pins {art.sha256}",
            details=[art.url],
        )
    try:
        os.rename(part_name, art.filename, src_dir_fd=dest_fd, dst_dir_fd=dest_fd)
    except OSError as exc:
        drop_part()
        raise dirfd.write_failed(art.filename, exc) from None
    return True


def download(
    state: LockState,
    manifest: Manifest,
    dest: Path,
    *,
    progress: Progress | None = None,
    workers: int = 4,
    limits: Limits | None = None,
) -> dict[str, Any]:
    if workers < 1:
        raise BadInput(f"--workers {workers}: must be at least 1")
    arts, skipped = artifacts(state, manifest)
    base = limits or Limits()
    total = sum(a.size or 0 for a in arts)
    # the whole wheelhouse: every file at the minimum rate, and a request's time per file
    limits = Limits(
        request_s=base.request_s,
        min_rate=base.min_rate,
        total_s=max(base.total_s, base.request_s * len(arts) / workers + total / base.min_rate),
        connect_s=base.connect_s,
    )
    budget = Budget(limits, what="the wheelhouse")
    with make_client(limits, max_connections=max(4, workers)) as client:
        # before the first byte of an artifact, and before the folder is created
        check_origins(manifest, state, listing=True, client=client, budget=budget)
        dest_fd = dirfd.open_dir(dest, create=True)
        report = progress or (lambda _a, _n: None)
        try:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                results = list(pool.map(lambda a: _fetch(a, dest_fd, client, budget, report), arts))
            index_text = json.dumps(_index(manifest, state, arts, skipped), indent=2) + "\n"
            dirfd.write_at(dest_fd, MANIFEST_NAME, index_text.encode())
            try:
                sizes = sum(
                    os.stat(a.filename, dir_fd=dest_fd, follow_symlinks=False).st_size for a in arts
                )
            except OSError as exc:
                raise dirfd.write_failed(dest, exc) from None
        finally:
            os.close(dest_fd)
    return {
        "files": len(arts),
        "downloaded": sum(results),
        "kept": len(results) - sum(results),
        "bytes": sizes,
        "skipped": skipped,
    }


def _index(
    manifest: Manifest, state: LockState, arts: list[Artifact], skipped: list[str]
) -> dict[str, Any]:
    """The wheelhouse's index (what build --wheelhouse reads): every file, its origin."""
    return {
        "stack": manifest.name,
        "lock_hash": state.lock_hash,
        "files": [
            {
                "file": a.filename,
                "package": a.package,
                "version": a.version,
                "sha256": a.sha256,
                "url": redact(a.url),  # the file keeps no credential; uv has them
            }
            for a in sorted(arts, key=lambda a: a.filename)
        ],
        "skipped": skipped,
    }
