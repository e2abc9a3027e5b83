"""The content hash of an environment's files, a per-file listing beside it, and the re-check
that says whether an env still holds what its build record says.

What the hash covers: relative path, kind (file, executable file, symlink, other) and content
of every file and symlink of the env, not timestamps, owners or other mode bits, so two builds
of one lock and profile (in different folders, cold or warm uv cache) compare equal.

Left out, because they are written after the build or say how a package got there, not what
it is (measured on the cu128 env in docs/guarantees.md):
- byte-code caches: every `__pycache__` folder (the build fills them with checked-hash `.pyc`,
  builder.venv.bytecode, and imports write more on first use; each `.pyc` embeds the path it
  was compiled at, length-prefixed, which the own-path normalization below cannot undo);
- the build record and this listing (`stackgate/build-record.json`, `stackgate/tree.tsv.gz`);
- installer bookkeeping in `*.dist-info` (RECORD, INSTALLER, REQUESTED, direct_url.json,
  uv_cache.json), which differs between `uv sync` from an index and `uv pip` from a wheelhouse.

Absolute mentions of the env's own folder (and of its `.partial` build folder) in files up to
1 MiB are replaced by a placeholder before hashing. A FIFO, socket or device inside the env is
hashed by its kind alone and never opened (opening a FIFO would block).

Hash schemes: 1 (records before the re-check existed) skipped the whole `stackgate/` folder
and every `*.pyc` anywhere; 2 also covers `stackgate/env.sh` (sourced by shells: an edit there
changes what runs) and sourceless `*.pyc` outside `__pycache__` (importable modules); 3 also
covers empty folders (kind D: an empty `site-packages/foo/` makes `import foo` and
`find_spec("foo")` succeed as a namespace package, so optional-dependency checks change) and
the set-user/group-id bits (kind suffix `s`). An env with neither hashes the same under 2 and 3.
"""

from __future__ import annotations

import builtins
import gzip
import hashlib
import os
import re
import stat
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from stackgate import dirfd
from stackgate.build_record import RECORD_DIRNAME, RECORD_FILENAME
from stackgate.envtree.digests import DigestCache, Key, key_of, rememberable
from stackgate.envtree.early_digests import Early
from stackgate.envtree.wheel_records import hash_workers
from stackgate.errors import BadInput
from stackgate.layout import PARTIAL_SUFFIX

SCHEME = 3
LISTING_FILENAME = "tree.tsv.gz"
LISTING_RELPATH = Path(RECORD_DIRNAME) / LISTING_FILENAME

_SMALL_FILE = 1 << 20
_PLACEHOLDER = b"<STACKGATE_ENV>"
_INSTALLER_FILES = frozenset(
    {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json", "uv_cache.json"}
)
_OWN_FILES = frozenset({RECORD_FILENAME, LISTING_FILENAME})

# kinds: F file, X executable file (any x bit), L symlink (digest = its target), S anything else,
# D empty folder (scheme 3); F/X + `s` when a set-user/group-id bit is set (scheme 3)
Entry = tuple[str, str, bytes]  # (relative path, kind, digest or symlink target)


@dataclass(frozen=True)
class Tree:
    sha256: str
    files: int
    bytes: int
    scheme: int
    entries: tuple[Entry, ...]
    # relative path -> sha256 of the bytes as they are, for every regular file read by this
    # walk or remembered over 1 MiB (never normalized): what the RECORD check needs
    raw: Mapping[str, builtins.bytes] = field(default_factory=dict, compare=False, repr=False)


def _walk(root: str, rel: str, scheme: int, out: list[tuple[str, str, os.stat_result]]) -> None:
    """(relative path, absolute path, lstat) of every file and symlink, str paths only (a cu128
    env has 58k files; pathlib alone cost seconds). Symlinked folders are listed as links; from
    scheme 3 a folder below the root with nothing hashed inside is listed itself."""
    start = len(out)
    with os.scandir(f"{root}/{rel}" if rel else root) as it:
        entries = list(it)
    in_dist_info = rel.endswith(".dist-info")
    for entry in entries:
        sub = f"{rel}/{entry.name}" if rel else entry.name
        if entry.is_dir(follow_symlinks=False):
            if entry.name == "__pycache__":
                continue
            if scheme < 2 and entry.name == RECORD_DIRNAME:
                continue
            _walk(root, sub, scheme, out)
            continue
        if in_dist_info and entry.name in _INSTALLER_FILES:
            continue
        if rel == RECORD_DIRNAME and entry.name in _OWN_FILES:
            continue
        if scheme < 2 and entry.name.endswith(".pyc"):
            continue
        out.append((sub, entry.path, entry.stat(follow_symlinks=False)))
    if scheme >= 3 and rel and rel != RECORD_DIRNAME and len(out) == start:
        folder = f"{root}/{rel}"
        out.append((rel, folder, os.lstat(folder)))


def _file_digest(path: str, size: int, patterns: list[bytes]) -> tuple[bytes, bytes]:
    """(the tree's digest, the sha256 of the bytes as they are): one read serves the tree hash
    and the RECORD check (stackgate.envtree.wheel_records); they differ only for a small file that
    mentions the env's own path."""
    with open(path, "rb") as handle:  # noqa: PTH123 -- str paths: speed
        if size > _SMALL_FILE:
            raw = hashlib.file_digest(handle, "sha256").digest()
            return raw, raw
        data = handle.read(_SMALL_FILE + 1)
    raw = hashlib.sha256(data).digest()
    if not any(pattern in data for pattern in patterns):
        return raw, raw
    for pattern in patterns:
        data = data.replace(pattern, _PLACEHOLDER)
    return hashlib.sha256(data).digest(), raw


def digest_patterns(root: Path, own_paths: Iterable[Path]) -> list[bytes]:
    """The env's own paths as bytes, longest first: what small files' digests normalize."""
    return sorted({str(p).encode() for p in (root, *own_paths)}, key=len, reverse=True)


def file_digests(path: str, size: int, patterns: list[bytes]) -> tuple[bytes, bytes]:
    """(tree digest, raw sha256) of one file from one read (early_digests.py uses it)."""
    return _file_digest(path, size, patterns)


def own_paths_of(env: Path) -> tuple[Path, ...]:
    """The folders an env's files may mention: where it is and where it was built."""
    real = env.resolve()
    return (real, real.with_name(real.name + PARTIAL_SUFFIX))


def compute_tree(
    root: Path,
    *,
    own_paths: Iterable[Path] = (),
    cache: DigestCache | None = None,
    scheme: int = SCHEME,
    early: Mapping[str, Early] | None = None,
) -> Tree:
    """Hash every file under root (see the module docstring for what is left out).

    own_paths: absolute paths this tree was built at; their mentions in small files are
    normalized. cache: remembered digests (stackgate.envtree.digests), consulted only for files that
    cannot mention the env's own path: hard links shared with uv's cache (nlink > 1) and files
    over 1 MiB (never normalized). Files uv wrote for this env alone are always read.
    early: digests read while the env was being installed (early_digests.py), used for files
    provably unchanged since.
    """
    patterns = digest_patterns(root, own_paths)
    early = early or {}
    known = cache.load() if cache is not None else {}
    found: list[tuple[str, str, os.stat_result]] = []
    _walk(str(root), "", scheme, found)
    found.sort(key=lambda item: item[0])  # one order for every walk: by relative path
    kinds: list[str] = []
    digests: list[bytes] = []
    todo: list[tuple[int, str, int, Key | None]] = []
    total = 0
    raw: dict[str, bytes] = {}
    for index, (_rel, full, st) in enumerate(found):
        mode = st.st_mode
        if stat.S_ISLNK(mode):
            target = os.readlink(full).encode()  # noqa: PTH115 -- str paths: speed
            for pattern in patterns:
                target = target.replace(pattern, _PLACEHOLDER)
            kinds.append("L")
            digests.append(target)
            continue
        if stat.S_ISDIR(mode):
            kinds.append("D")
            digests.append(b"")
            continue
        if not stat.S_ISREG(mode):
            kinds.append("S")
            digests.append(b"")
            continue
        total += st.st_size
        kind = "X" if mode & 0o111 else "F"
        kinds.append(kind + "s" if scheme >= 3 and mode & (stat.S_ISUID | stat.S_ISGID) else kind)
        pre = early.get(_rel)
        if pre is not None and pre.valid_for(st):
            digests.append(pre.tree)
            raw[_rel] = pre.raw
            continue
        shared = st.st_nlink > 1 or st.st_size > _SMALL_FILE
        key = key_of(st) if shared else None
        cached = known.get(key) if key is not None else None
        digests.append(cached or b"")
        if cached is not None and cache is not None and key is not None:
            cache.used(key)
            if st.st_size > _SMALL_FILE:
                raw[_rel] = cached
        if cached is None:
            todo.append((index, full, st.st_size, key if key and rememberable(st) else None))
    fresh = _digest_all(todo, patterns)
    for (index, _full, _size, key), (digest, raw_digest) in zip(todo, fresh, strict=True):
        digests[index] = digest
        raw[found[index][0]] = raw_digest
        if key is not None and cache is not None:
            cache.remember(key, digest)
    if cache is not None:
        cache.flush()
    entries = [
        (rel, kind, digest)
        for (rel, _full, _st), kind, digest in zip(found, kinds, digests, strict=True)
    ]
    return Tree(hash_entries(entries), len(entries), total, scheme, tuple(entries), raw)


def hash_entries(entries: Iterable[Entry]) -> str:
    """The tree hash of a listing in path order (compute_tree's last step; reproduce hashes
    a built env's listing again with a few generated files as its record wrote them)."""
    tree = hashlib.sha256()
    for rel, kind, digest in entries:
        tree.update(
            kind.encode() + b"\0" + rel.encode() + b"\0" + digest + (b"\0" if kind == "L" else b"")
        )
    return tree.hexdigest()


def content_digest(data: bytes, own_paths: Iterable[Path] = ()) -> bytes:
    """The digest compute_tree gives a small file holding `data` (own paths normalized)."""
    for pattern in sorted({str(p).encode() for p in own_paths}, key=len, reverse=True):
        data = data.replace(pattern, _PLACEHOLDER)
    return hashlib.sha256(data).digest()


def _digest_all(
    todo: list[tuple[int, str, int, Key | None]], patterns: list[bytes]
) -> list[tuple[bytes, bytes]]:
    """Every file's digests, read by one thread per usable core (sha256 releases the GIL),
    each thread taking the next file from one shared queue: an env is tens of thousands of
    files, a few of them gigabytes."""
    out: list[tuple[bytes, bytes]] = [(b"", b"")] * len(todo)
    # biggest first, so one big file read last does not leave the other threads idle
    order = iter(sorted(range(len(todo)), key=lambda i: -todo[i][2]))
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                position = next(order, None)
            if position is None:
                return
            _index, full, size, _key = todo[position]
            out[position] = _file_digest(full, size, patterns)

    workers = max(1, min(hash_workers(), len(todo)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for job in [pool.submit(work) for _ in range(workers)]:
            job.result()
    return out


def write_listing(env: Path, tree: Tree) -> Path:
    """<env>/stackgate/tree.tsv.gz: one `kind<TAB>digest<TAB>path` line per file, so a later
    mismatch can name the files that changed."""
    target = env / LISTING_RELPATH
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    lines = [f"# stackgate tree listing, scheme {tree.scheme}, sha256 {tree.sha256}\n"]
    lines += [f"{kind}\t{digest.hex()}\t{rel}\n" for rel, kind, digest in tree.entries]
    with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=1) as handle:
        handle.writelines(lines)
    tmp.replace(target)
    return target


def read_listing(env: Path, *, max_bytes: int = 256 << 20) -> dict[str, tuple[str, str]] | None:
    """rel -> (kind, digest) from the env's listing; None when it has none or it is unreadable."""
    return read_listing_file(env / LISTING_RELPATH, max_bytes=max_bytes)


def read_listing_file(
    path: Path, *, max_bytes: int = 256 << 20, under: Path | None = None
) -> dict[str, tuple[str, str]] | None:
    """A listing file (an env's, or a copy of one); None when absent, unreadable or not a
    regular file. `under`: a folder others may write (a fleet's job folder); no component
    below it is followed when a symlink."""
    try:
        if under is None:
            if not stat.S_ISREG(path.lstat().st_mode):
                return None
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        else:
            fd = dirfd.open_regular_under(under, path.relative_to(under))
    except (OSError, BadInput, ValueError):
        return None
    try:
        out: dict[str, tuple[str, str]] = {}
        read = 0
        with (
            os.fdopen(fd, "rb") as raw,
            gzip.open(raw, "rt", encoding="utf-8") as handle,
        ):
            for line in handle:
                read += len(line)
                if read > max_bytes:
                    return None
                if line.startswith("#"):
                    continue
                kind, digest, rel = line.rstrip("\n").split("\t", 2)
                out[rel] = (kind, digest)
        return out
    except (OSError, ValueError, EOFError):
        return None


def differing_files(recorded: dict[str, tuple[str, str]], tree: Tree, limit: int = 10) -> list[str]:
    """The first `limit` differences, in path order: 'changed', 'added' or 'missing' + path; when
    there are more, a last line says how many were left out (a reader must not take the named
    ones for all of them)."""
    now = {rel: (kind, digest.hex()) for rel, kind, digest in tree.entries}
    out: list[str] = []
    left_out = 0
    for rel in sorted(set(recorded) | set(now)):
        before, after = recorded.get(rel), now.get(rel)
        if before == after:
            continue
        if len(out) >= limit:
            left_out += 1
        elif before is None:
            out.append(f"added: {rel}")
        elif after is None:
            out.append(f"missing: {rel}")
        elif before[1] == after[1]:
            out.append(f"mode changed ({before[0]} -> {after[0]}): {rel}")
        else:
            out.append(f"changed: {rel}")
    if left_out:
        out.append(f"... and {left_out} more differing paths (only the first {limit} are named)")
    return out


@dataclass(frozen=True)
class TreeCheck:
    env: Path
    recorded_sha256: str
    tree: Tree
    differing: list[str]
    has_listing: bool
    outside: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.tree.sha256 == self.recorded_sha256 and not self.outside

    def explain(self) -> list[str]:
        if self.ok:
            return []
        if self.tree.sha256 == self.recorded_sha256:
            return [f"leads outside the env (its content is not hashed): {o}" for o in self.outside]
        if not self.has_listing:
            return ["the env has no per-file listing (built before it existed): rebuild it"]
        return self.differing or [
            "the listing matches but the hash does not: the listing was edited"
        ]


def check_tree(
    env: Path, recorded_sha256: str, *, scheme: int = SCHEME, cache: DigestCache | None = None
) -> TreeCheck:
    """Hash the env again (with the digest cache) and compare it with the recorded hash."""
    real = env.resolve()
    tree = compute_tree(real, own_paths=own_paths_of(real), cache=cache, scheme=scheme)
    listing = None if tree.sha256 == recorded_sha256 else read_listing(real)
    differing = differing_files(listing, tree) if listing is not None else []
    outside = links_leading_out(real, tree)
    return TreeCheck(real, recorded_sha256, tree, differing, listing is not None, outside)


# The interpreter links uv makes (bin/python -> the base interpreter, bin/python3 -> python): the
# one place an env points outside itself; the base interpreter is named in the build record.
_INTERPRETER_LINK = re.compile(r"^bin/python[0-9.]*\Z")


def links_leading_out(root: Path, tree: Tree) -> list[str]:
    """Symlinks whose target lies outside the env, as 'rel -> target'. The hash covers a link's
    target text, not what it points at: `site-packages/pkg -> /tmp/pkg` imports whatever
    /tmp/pkg holds tomorrow under today's hash. Only the interpreter links may leave."""
    base = str(root)
    out: list[str] = []
    for rel, kind, target in tree.entries:
        if kind != "L" or _PLACEHOLDER in target or _INTERPRETER_LINK.match(rel):
            continue
        text = target.decode(errors="replace")
        folder = f"{base}/{rel.rpartition('/')[0]}"
        where = os.path.normpath(text if text.startswith("/") else f"{folder}/{text}")
        if where != base and not where.startswith(base + os.sep):
            out.append(f"{rel} -> {text}")
    return out
