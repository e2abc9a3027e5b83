"""The ABI resolution and the GPU-code scan of an unchanged env, kept across runs.

Even with every file's facts cached (file_facts_cache.py), re-resolving every import and
re-reading every cubin header costs a warm run seconds of CPU. The outcome is a function of this
tool's code and of what the file system told the run, so the memo keeps, beside it, every such
answer: the listing of every folder listed, the identity (file_facts_cache.file_identity) of
every file read in or out of the env, and where every symlink resolved led. It is keyed by the
code, the env's paths, distributions and RECORD ownership, its ELF files' identities, the
interpreter and the system library folders. A later run asks those questions again (cheap) and
takes the outcome only when every answer is the same; otherwise it resolves again. Nothing here
decides a verdict.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

import stackgate
import validators.core.results as results_module
import validators.elf as elf_package
from validators.elf.cached_facts import CachedFacts
from validators.elf.elf_symbols import ElfReadError
from validators.elf.fatbin import GpuCode
from validators.elf.file_facts_cache import FileFactsCache, file_identity
from validators.elf.source import DiskSource
from validators.static.abi_check import AbiChecker, AbiFindings
from validators.static.arch_check import DistCode
from validators.static.environment import Environment
from validators.static.preloaders import PRELOADER_SOURCES

CACHE_VERSION = 1  # in every kept outcome's key (code_digest)
_HERE = Path(__file__).resolve().parent


def code_files(*readers: Path) -> list[tuple[str, Path]]:
    """(name, file) of the code whose outcome is kept: the static group's modules, validators/elf/,
    the run core's, the folders of `readers` keeping their own outcome over it (lockcheck/), and the
    whole stackgate package (its version rule and arch table decide findings). Found through the
    modules themselves, wherever a layout change puts them.
    """
    modules = (elf_package.__file__, results_module.__file__)
    folders = [_HERE, *(Path(m).resolve().parent for m in modules), *readers]
    files = [(f"{f.name}/{p.name}", p) for f in folders for p in sorted(f.glob("*.py"))]
    package = Path(stackgate.__file__).resolve().parent
    for path in sorted(package.rglob("*.py")):
        files.append((f"stackgate/{path.relative_to(package).as_posix()}", path))
    return files


@functools.cache
def code_digest(*readers: Path) -> str:
    """The digest of code_files(*readers): any edit of them makes every memo a miss."""
    h = hashlib.sha256(f"memo {CACHE_VERSION}".encode())
    for name, path in code_files(*readers):
        h.update(name.encode() + b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()


def _listing_digest(directory: str) -> str:
    """The folder's names, less those no loader is ever asked for: Python writes __pycache__
    and .pyc files beside the modules on their first import (else the first `import vllm`
    after a run makes the next one resolve again)."""
    try:
        names = sorted(
            n
            for n in os.listdir(directory)  # noqa: PTH208 (names only, fast)
            if n != "__pycache__" and not n.endswith((".py", ".pyc", ".pyi"))
        )
    except OSError:
        names = []
    return hashlib.sha256("\0".join(names).encode()).hexdigest()


class Answers(BaseModel):
    """What the file system told one run: folder -> digest of its names, path -> the real
    path it resolved to (only where a symlink was followed), file -> identity (None: absent)."""

    model_config = ConfigDict(extra="forbid")

    listings: dict[str, str] = {}
    links: dict[str, str] = {}
    files: dict[str, str | None] = {}

    def first_change(self) -> str | None:
        """The first recorded answer the file system now gives differently (None: all the
        same), said so a reader knows why a run was not reused."""
        for path, ident in self.files.items():
            if file_identity(Path(path)) != ident:
                return f"{path} changed"
        for path, real in self.links.items():
            if os.path.realpath(path) != real:
                return f"{path} no longer leads to {real}"
        for folder, digest in self.listings.items():
            if _listing_digest(folder) != digest:
                return f"the listing of {folder} changed"
        return None


def answers_of(source: DiskSource) -> Answers:
    """What `source` was asked and answered so far."""
    return Answers(
        listings={d: _listing_digest(d) for d in source.listed()},
        links={p: str(real) for p, real in source.resolved().items() if p != str(real)},
        files={str(p): file_identity(p) for p in source.read_paths()},
    )


@dataclass
class Resolution:
    """What `AbiChecker` found for an env's roots, and what abi_results asks it afterwards."""

    extensions: list[Path]
    plugins: list[Path]
    findings: AbiFindings
    shipped: dict[str, Path]
    package_preloads: set[tuple[Path, str]]
    native: set[Path]  # roots this host's interpreter can load (same ELF machine and class)
    memo: str = "off"  # off / hit / stored / miss (not stored)
    changed: str | None = None  # why a kept resolution was not reused (an answer changed)
    _checker: AbiChecker | None = field(default=None, repr=False)

    def checker(self) -> AbiChecker:
        """The checker (after a memo hit, one that has read nothing yet: it reads what the
        rare question only a resolver answers needs, e.g. does a crashed module reach
        libcuda.so.1?)."""
        assert self._checker is not None
        return self._checker


class _AbiEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answers: Answers
    extensions: list[Path]
    plugins: list[Path]
    findings: AbiFindings
    shipped: dict[str, Path]
    package_preloads: list[tuple[Path, str]]
    native: list[Path]


def _env_key(kind: str, env: Environment, shared: list[Path], system_dirs: Iterable[str]) -> str:
    """The env as the resolution sees it: paths, interpreter, distributions and which of them
    owns each file (RECORD), every ELF file's identity, the system library folders."""
    h = hashlib.sha256(f"{kind}\0{code_digest()}\0{env.root}\0{env.site_packages}".encode())
    interp = env.interpreter
    h.update(f"\0{interp}\0{file_identity(interp) if interp else None}".encode())
    h.update(f"\0{env.python_version}\0{'|'.join(system_dirs)}".encode())
    for key, dist in sorted(env.distributions.items()):
        h.update(f"\0{key}={dist.name} {dist.version} {dist.dist_info}".encode())
    for path, dist in sorted(env.owners.items()):
        h.update(f"\0{path}>{dist.key}".encode())
    for path in shared:
        h.update(f"\0{path}={file_identity(path)}".encode())
    for rel in PRELOADER_SOURCES:  # the preload lists read from them (preloaders.py)
        source = env.site_packages / rel
        h.update(f"\0{source}={file_identity(source)}".encode())
    return h.hexdigest()


def resolve(
    env: Environment,
    shared: list[Path],
    make_checker: Callable[[], AbiChecker],
    cache: FileFactsCache | None,
    *,
    memo: bool,
) -> Resolution:
    """The env's resolution: from the memo when every answer it was reached from still
    holds (memo=True needs a DiskSource checker and a cache), else from the resolver."""
    checker = make_checker()
    key, changed = None, None
    if memo and cache is not None and isinstance(checker.source, DiskSource):
        key = _env_key("abi", env, shared, checker.resolver.system_dirs)
        hit, changed = _load(cache, "memo-abi", key)
        if hit is not None:
            return Resolution(
                hit.extensions,
                hit.plugins,
                hit.findings,
                hit.shipped,
                set(hit.package_preloads),
                set(hit.native),
                memo="hit",
                _checker=checker,  # nothing read yet: reads only if asked (checker())
            )
    extensions, plugins = checker.split_roots(shared)
    findings = checker.check([*extensions, *plugins])
    native = {r for r in [*extensions, *plugins] if _native(checker, r, env)}
    out = Resolution(
        extensions,
        plugins,
        findings,
        dict(checker.shipped),
        set(checker.resolver.package_preloads),
        native,
        memo="off" if key is None else "miss",
        changed=changed if key is not None else None,
        _checker=checker,
    )
    if key is not None and cache is not None and isinstance(checker.source, DiskSource):
        entry = _AbiEntry(
            answers=answers_of(checker.source),
            extensions=extensions,
            plugins=plugins,
            findings=findings,
            shipped=out.shipped,
            package_preloads=sorted(out.package_preloads),
            native=sorted(native),
        )
        cache.put_text("memo-abi", key, entry.model_dump_json())
        out.memo = "stored"
    return out


def _load(cache: FileFactsCache, kind: str, key: str) -> tuple[_AbiEntry | None, str | None]:
    """(the kept entry if every answer still holds, what changed if one does not)."""
    text = cache.get_text(kind, key)
    if text is None:
        return None, None
    try:
        entry = _AbiEntry.model_validate_json(text)
    except ValidationError:
        return None, None
    changed = entry.answers.first_change()
    return (entry, None) if changed is None else (None, changed)


def _native(checker: AbiChecker, path: Path, env: Environment) -> bool:
    """An object this host's interpreter can load (same ELF machine and class)."""
    if env.interpreter is None:
        return True
    try:
        obj, python = checker.resolver.load(path), checker.resolver.load(env.interpreter)
    except ElfReadError:
        return False
    return obj.machine == python.machine and obj.elf_class == python.elf_class


# --- the GPU-code scan ---------------------------------------------------------------------


class _ArchEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # label -> (library -> code labels, [code label, count] of cubins, unreadable, unknown)
    per_dist: dict[
        str,
        tuple[
            dict[Path, list[str]],
            list[tuple[str, int]],
            list[tuple[Path, str]],
            dict[Path, list[str]],
        ],
    ]


def cached_scan(
    env: Environment,
    shared: list[Path],
    cache: FileFactsCache | None,
    scan: Callable[[], dict[str, DistCode]],
) -> dict[str, DistCode]:
    """The arch scan's outcome, kept while the env's ELF files and cubins are the same files
    (the scan reads nothing else: each file's GPU code, and RECORD ownership)."""
    if cache is None:
        return scan()
    h = hashlib.sha256(_env_key("arch", env, shared, ()).encode())
    for path in env.cubin_files():
        h.update(f"\0{path}={file_identity(path)}".encode())
    key = h.hexdigest()
    text = cache.get_text("memo-arch", key)
    if text is not None:
        try:
            return _dist_codes(_ArchEntry.model_validate_json(text))
        except ValidationError:
            pass
    out = scan()
    entry = _ArchEntry(
        per_dist={
            label: (
                {p: [c.label() for c in codes] for p, codes in code.libraries.items()},
                [(c.label(), n) for c, n in code.cubins.items()],
                list(code.unreadable),
                {p: list(why) for p, why in code.unknown.items()},
            )
            for label, code in out.items()
        }
    )
    cache.put_text("memo-arch", key, entry.model_dump_json())
    return out


def _codes(labels: list[str]) -> list[GpuCode]:
    return CachedFacts(gpu_codes=labels).codes()


def _dist_codes(entry: _ArchEntry) -> dict[str, DistCode]:
    out: dict[str, DistCode] = {}
    for label, (libraries, cubins, unreadable, unknown) in entry.per_dist.items():
        counted: Counter[GpuCode] = Counter()
        for code_label, n in cubins:
            for code in _codes([code_label]):
                counted[code] += n
        out[label] = DistCode(
            libraries={p: _codes(c) for p, c in libraries.items()},
            cubins=counted,
            unreadable=list(unreadable),
            unknown={p: tuple(w) for p, w in unknown.items()},
        )
    return out
