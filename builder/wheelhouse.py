"""Download every artifact the lock pins for the stack's target into one folder, hash-checked,
so `build --offline --wheelhouse DIR` can reproduce the env with no network (the GPU hosts
lent here reach no registry; air-gapped sites are the same).

"Every artifact for the target": of each locked registry package, the wheels whose tags the
target (the manifest's Python minor, CPython, its platform) can install; the sdist only where
no wheel fits. Files are written as `<name>.part` and renamed after their sha256 matched the
lock; an existing file with the right hash is kept (re-runs resume).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import parse_wheel_filename

from builder.lock import LockState
from stackgate.errors import EnvironmentProblem
from stackgate.files import atomic_write_text, sha256_file
from stackgate.manifest import Manifest
from stackgate.uvlock import LockedFile

MANIFEST_NAME = "wheelhouse.json"
_MAX_GLIBC_MINOR = 40


@dataclass(frozen=True)
class Artifact:
    package: str
    version: str
    url: str
    sha256: str
    size: int | None
    registry: str

    @property
    def filename(self) -> str:
        return unquote(urlsplit(self.url).path.rsplit("/", 1)[-1])


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
    for pkg in state.lock.dependencies():
        name, version = pkg.name, pkg.version or ""
        registry = pkg.source.registry
        if registry is None:
            skipped.append(f"{name} ({pkg.source.kind} source)")
            continue
        chosen: list[LockedFile] = []
        for wheel in pkg.wheels:
            _, _, _, wheel_tags = parse_wheel_filename(unquote(wheel.filename))
            if wheel_tags & tags:
                chosen.append(wheel)
        if not chosen and pkg.sdist is not None:
            chosen = [pkg.sdist]
        for entry in chosen:
            out.append(Artifact(name, version, entry.location, _hash(entry), entry.size, registry))
    return out, skipped


Progress = Callable[[Artifact, int], None]


def _fetch(art: Artifact, dest: Path, client: httpx.Client, progress: Progress) -> bool:
    """Fetch one artifact; True when downloaded, False when an identical copy was kept."""
    target = dest / art.filename
    if target.is_file() and sha256_file(target) == art.sha256:
        progress(art, art.size or target.stat().st_size)
        return False
    part = target.with_name(target.name + ".part")
    digest = hashlib.sha256()
    parts = urlsplit(art.url)
    try:
        if parts.scheme == "file":
            with Path(unquote(parts.path)).open("rb") as src, part.open("wb") as out:
                for chunk in iter(lambda: src.read(1 << 20), b""):
                    digest.update(chunk)
                    out.write(chunk)
                    progress(art, len(chunk))
        else:
            with client.stream("GET", art.url) as response, part.open("wb") as out:
                response.raise_for_status()
                for chunk in response.iter_bytes(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
                    progress(art, len(chunk))
    except (httpx.HTTPError, OSError) as exc:
        part.unlink(missing_ok=True)
        raise EnvironmentProblem(
            f"cannot download {art.filename} from index {art.registry}: {exc}",
            details=[art.url],
        ) from exc
    if digest.hexdigest() != art.sha256:
        part.unlink(missing_ok=True)
        raise EnvironmentProblem(
            f"hash mismatch for {art.filename}: got sha256 {digest.hexdigest()}, "
            f"the lock pins {art.sha256}",
            details=[art.url],
        )
    part.replace(target)
    return True


def download(
    state: LockState,
    manifest: Manifest,
    dest: Path,
    *,
    progress: Progress | None = None,
    workers: int = 4,
) -> dict[str, Any]:
    arts, skipped = artifacts(state, manifest)
    dest.mkdir(parents=True, exist_ok=True)
    report = progress or (lambda _a, _n: None)
    with (
        httpx.Client(follow_redirects=True, timeout=httpx.Timeout(60.0)) as client,
        ThreadPoolExecutor(max_workers=workers) as pool,
    ):
        results = list(pool.map(lambda a: _fetch(a, dest, client, report), arts))
    index = {
        "stack": manifest.name,
        "lock_hash": state.lock_hash,
        "files": [
            {
                "file": a.filename,
                "package": a.package,
                "version": a.version,
                "sha256": a.sha256,
                "url": a.url,
            }
            for a in sorted(arts, key=lambda a: a.filename)
        ],
        "skipped": skipped,
    }
    atomic_write_text(dest / MANIFEST_NAME, json.dumps(index, indent=2) + "\n")
    return {
        "files": len(arts),
        "downloaded": sum(results),
        "kept": len(results) - sum(results),
        "bytes": sum((dest / a.filename).stat().st_size for a in arts),
        "skipped": skipped,
    }
