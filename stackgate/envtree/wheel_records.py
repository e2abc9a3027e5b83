"""Installed files judged against the RECORDs of every distribution that claims them.

Each `*.dist-info/RECORD` lists the files its wheel installed with the sha256 the wheel's own
RECORD gave them (uv adds the files it generates, console scripts, INSTALLER, REQUESTED,
direct_url.json, uv_cache.json, with their hashes). A path two or more RECORDs list is a
*clash*: wheels may ship the same file (`nvidia/__init__.py` in every nvidia-* wheel, a
top-level `build_backend.py` in flashinfer-python 0.6.3 and torch-c-dlpack-ext 0.1.5), the
installer writes each in turn and the last one written stays. Which one that is depends on the
installer's order, so a clash is judged by the bytes: the env holds the copy of every owner
whose RECORD lists the file's sha256. A clash is a fact to report, not damage. uv installs
wheels in parallel, so which copy it leaves varies between two installs of one lock; the copy an
env must hold is fixed by one rule (`chosen_owner`), and the builder puts that copy in place
(builder/venv/clash_settle.py) so two builds of a lock hash equal. A file that
matches none of the RECORDs listing it with a hash is damage (or missing, or leads out of the
env).

Not judged, because no RECORD hashes them: each RECORD itself, rows without a hash (byte-code
some wheels list), files no RECORD lists (`.pth` files an installer or `--base-site` writes, a
venv's own files, byte-code written later).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from packaging.utils import canonicalize_name

from stackgate.build_record import FileClash
from stackgate.files import read_text_bounded

MAX_RECORD_BYTES = 64 << 20
DamageKind = Literal["differs", "missing", "outside", "unreadable"]


@dataclass(frozen=True)
class Claim:
    """One RECORD row: the distribution (its dist-info folder's name), the row's path as
    written (relative to site-packages) and the sha256 it lists (RECORD's urlsafe base64), if
    any."""

    dist: str
    row_path: str
    digest: str | None


@dataclass(frozen=True)
class Claims:
    """Every RECORD row of an env, by path relative to the env's root (normalized: a `.data`
    script's `../../../bin/x` is `bin/x`)."""

    env: Path
    by_path: dict[str, list[Claim]]
    # rows naming a path outside the env, and RECORDs that could not be read
    outside: list[Claim] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)

    def clash_paths(self) -> list[str]:
        return sorted(p for p, cs in self.by_path.items() if len({c.dist for c in cs}) > 1)


def lock_order(dist: str) -> tuple[str, str]:
    """Where a distribution (its dist-info folder's name) stands in a uv.lock, which lists its
    packages by normalized project name (an env holds one version of each)."""
    return (str(canonicalize_name(dist.removesuffix(".dist-info").split("-")[0])), dist)


def chosen_owner(claims: Iterable[Claim]) -> Claim | None:
    """The claim whose copy a path several distributions install must hold: of the owners
    whose RECORD lists a sha256 for it, the last in lock order. That is the copy a sequential
    installer walking the lock from top to bottom leaves (each wheel written over the ones
    before), it depends on the lock alone (not on which of uv's parallel writes ends last), and
    the RECORD's sha256 proves the bytes put in place. None when no owner lists a hash."""
    hashed = [c for c in claims if c.digest]
    return max(hashed, key=lambda c: lock_order(c.dist)) if hashed else None


@dataclass(frozen=True)
class Damaged:
    path: str  # relative to the env
    kind: DamageKind
    claims: tuple[Claim, ...]
    detail: str = ""


@dataclass(frozen=True)
class Judgement:
    checked: int  # files hashed against at least one RECORD
    clashes: list[FileClash]
    damaged: list[Damaged]


def record_digest(sha256: bytes) -> str:
    """RECORD's form of a sha256 digest: urlsafe base64 without padding."""
    return base64.urlsafe_b64encode(sha256).rstrip(b"=").decode("ascii")


def site_packages(env: Path) -> list[Path]:
    return sorted(p for p in env.glob("lib/python*/site-packages") if p.is_dir())


def _rows(env: Path, site: Path, record: Path) -> tuple[list[tuple[str, Claim]], list[Claim]]:
    """(env-relative path, claim) of each row of one RECORD inside the env; the rows outside."""
    site_rel = os.path.relpath(site, env)
    dist = record.parent.name
    text = read_text_bounded(record, MAX_RECORD_BYTES)
    inside: list[tuple[str, Claim]] = []
    outside: list[Claim] = []
    for row in csv.reader(io.StringIO(text)):
        if not row or not row[0]:
            continue
        hashed = len(row) > 1 and row[1].startswith("sha256=")
        claim = Claim(dist, row[0], row[1].removeprefix("sha256=") if hashed else None)
        rel = os.path.normpath(os.path.join(site_rel, row[0]))  # noqa: PTH118 -- str paths: speed
        if row[0].startswith("/") or rel == ".." or rel.startswith("../"):
            outside.append(claim)
        else:
            inside.append((rel, claim))
    return inside, outside


@dataclass(frozen=True)
class ParsedRecord:
    """One RECORD's rows and the identity of the file they were read from: a later reader takes
    the rows again only while that identity holds (the rule of early_digests.py: inode, size,
    mtime and ctime unchanged, and last written STAMP_MARGIN_NS before the read began)."""

    ident: tuple[int, int, int, int]  # (inode, size, mtime_ns, ctime_ns)
    read_ns: int
    inside: tuple[tuple[str, Claim], ...]
    outside: tuple[Claim, ...]

    def valid_for(self, st: os.stat_result) -> bool:
        return (
            _ident(st) == self.ident
            and max(st.st_mtime_ns, st.st_ctime_ns) < self.read_ns - STAMP_MARGIN_NS
        )


# The kernel stamps files with a clock that may lag the reader's by a tick (<= 10 ms): a file
# written this close before a read may be rewritten within the same stamp.
STAMP_MARGIN_NS = 100_000_000


def _ident(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def parse_record(env: Path, site: Path, record: Path) -> ParsedRecord:
    """One RECORD's rows with the identity it was read at (OSError, ValueError: unreadable)."""
    read_ns = time.time_ns()
    st = os.stat(record)  # noqa: PTH116 -- str paths: speed
    inside, outside = _rows(env, site, record)
    return ParsedRecord(_ident(st), read_ns, tuple(inside), tuple(outside))


def read_claims(env: Path, parsed: Mapping[str, ParsedRecord] | None = None) -> Claims:
    """Every row of every `*.dist-info/RECORD` in the env's site-packages. parsed: RECORDs read
    before (by their path as str), taken again where the file is provably unchanged since."""
    parsed = parsed or {}
    by_path: dict[str, list[Claim]] = {}
    outside: list[Claim] = []
    unreadable: list[str] = []
    for site in site_packages(env):
        for record in sorted(site.glob("*.dist-info/RECORD")):
            try:
                before = parsed.get(str(record))
                if before is None or not before.valid_for(os.stat(record)):  # noqa: PTH116
                    before = parse_record(env, site, record)
            except (OSError, ValueError) as exc:
                unreadable.append(f"{os.path.relpath(record, env)}: {exc}")
                continue
            outside += before.outside
            for rel, claim in before.inside:
                by_path.setdefault(rel, []).append(claim)
    return Claims(env, by_path, outside, unreadable)


def _hash_in_env(root_real: str, env: Path, rel: str) -> tuple[str | None, DamageKind | None, str]:
    """(digest, problem, detail) of one file, following symlinks only inside the env."""
    path = env / rel
    try:
        real = os.path.realpath(path)
        if real != root_real and not real.startswith(root_real + os.sep):
            return None, "outside", f"leads outside the env ({real})"
        with open(real, "rb") as handle:  # noqa: PTH123 -- str paths: speed
            return record_digest(hashlib.file_digest(handle, "sha256").digest()), None, ""
    except FileNotFoundError:
        return None, "missing", "absent from the env"
    except OSError as exc:
        return None, "unreadable", str(exc.strerror or exc)


def hash_files(
    env: Path, rels: Iterable[str], workers: int | None = None
) -> dict[str, tuple[str | None, DamageKind | None, str]]:
    """rel -> (RECORD digest, problem, detail) for each file, read in parallel."""
    todo = list(rels)
    root_real = os.path.realpath(env)
    out: dict[str, tuple[str | None, DamageKind | None, str]] = {}
    lock = threading.Lock()
    items = iter(todo)

    def work() -> None:
        while True:
            with lock:
                rel = next(items, None)
            if rel is None:
                return
            out[rel] = _hash_in_env(root_real, env, rel)

    count = max(1, min(workers or hash_workers(), len(todo)))
    with ThreadPoolExecutor(max_workers=count) as pool:
        for job in [pool.submit(work) for _ in range(count)]:
            job.result()
    return out


def hash_workers() -> int:
    """Threads that read and hash files: sha256 releases the GIL, so one per usable core
    (at least 4: reads that wait on the disk overlap)."""
    return max(4, min(32, len(os.sched_getaffinity(0))))


def judge(
    claims: Claims,
    digests: Mapping[str, bytes] | None = None,
    *,
    only: Iterable[str] | None = None,
) -> Judgement:
    """Judge every claimed path (or the paths in `only`) against its owners' RECORDs.

    digests: rel -> raw sha256 of files already read (the tree hash's one pass); every other
    file is read here."""
    digests = digests or {}
    paths = sorted(claims.by_path) if only is None else sorted(set(only) & set(claims.by_path))
    known: dict[str, str] = {}
    need: list[str] = []
    for rel in paths:
        if not any(c.digest for c in claims.by_path[rel]):
            continue
        raw = digests.get(rel)
        if raw is not None:
            known[rel] = record_digest(raw)
        else:
            need.append(rel)
    read = hash_files(claims.env, need)
    checked = 0
    clashes: list[FileClash] = []
    damaged: list[Damaged] = []
    for rel in paths:
        owned = claims.by_path[rel]
        owners = sorted({c.dist for c in owned})
        listed = {c.digest for c in owned if c.digest}
        actual: str | None = known.get(rel)
        if listed and actual is None:
            actual, problem, detail = read[rel]
            if problem is not None:
                damaged.append(Damaged(rel, problem, tuple(owned), detail))
                continue
        if listed:
            checked += 1
        holds = sorted({c.dist for c in owned if c.digest and c.digest == actual})
        if listed and not holds:
            damaged.append(Damaged(rel, "differs", tuple(owned), "matches none of its RECORDs"))
            continue
        if len(owners) > 1:
            chosen = chosen_owner(owned)
            clashes.append(
                FileClash(
                    path=rel,
                    owners=owners,
                    holds=holds,
                    same_bytes=len(listed) == 1 and all(c.digest for c in owned),
                    chosen=chosen.dist if chosen is not None else None,
                )
            )
    damaged += [
        Damaged(c.row_path, "outside", (c,), "RECORD names a path outside the env")
        for c in claims.outside
        if c.digest
    ]
    damaged += [Damaged(what, "unreadable", (), "") for what in claims.unreadable]
    return Judgement(checked, clashes, damaged)
