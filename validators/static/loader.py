"""Find DT_NEEDED libraries the way ld.so would inside one Python environment.

Search order per soname (glibc's, with one addition):
1. libraries an earlier import really loaded (`loaded_first`, preloaders.py): ld.so matches
   later DT_NEEDED entries by soname against loaded objects (sgl-kernel's extensions have no
   RPATH and rely on this); a library torch loads only lazily is not among them. The
   nvidia/*/lib libraries serve one another (`preloaded`, for roots under `preload_under`);
2. DT_RPATH of the requester and of the objects that loaded it (ignored when the requester has
   DT_RUNPATH), then the requester's DT_RUNPATH; $ORIGIN expanded;
3. not LD_LIBRARY_PATH: a check must not depend on the caller's shell;
4. the system directories from /etc/ld.so.conf(.d) and the defaults;
5. last, a library of the requester's own package (its folder or a lib/ beside it, up to the
   package's top), which packages such as torchaudio load themselves first. Such finds are
   reported; one the package's source does not name in a load (`own_loads`,
   package_loads.py) is unknown, not loaded.

A candidate must be ELF of the same class and machine, as ld.so skips the others.
"""

from __future__ import annotations

import glob
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from validators.elf.elf_symbols import ElfObject, ElfReadError
from validators.elf.source import DiskSource, ObjectSource

DEFAULT_SYSTEM_DIRS = (
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
)

# Provided by the NVIDIA driver on a GPU host, never by a Python environment.
HOST_PROVIDED = {"libcuda.so.1", "libnvidia-ml.so.1", "libcuda.so", "libnvidia-ml.so"}


def system_library_dirs(conf: Path = Path("/etc/ld.so.conf")) -> tuple[str, ...]:
    """Directories from ld.so.conf (following `include` globs), then the defaults."""
    found: list[str] = []

    def read(file: Path, depth: int) -> None:
        if depth > 4:
            return
        try:
            lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return
        for line in lines:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if line.startswith("include"):
                pattern = line.split(None, 1)[1] if " " in line else ""
                if not pattern.startswith("/"):
                    pattern = str(file.parent / pattern)
                for inc in sorted(glob.glob(pattern)):  # noqa: PTH207 (absolute patterns)
                    read(Path(inc), depth + 1)
            else:
                found.append(line)

    read(conf, 0)
    return tuple(dict.fromkeys([*found, *DEFAULT_SYSTEM_DIRS]))


def expand_origin(entry: str, origin: Path) -> str:
    if "ORIGIN" not in entry:
        return entry
    text = str(origin)
    return entry.replace("${ORIGIN}", text).replace("$ORIGIN", text)


@dataclass
class Resolver:
    """Resolves sonames to parsed ELF objects; caches parses (each file read once).

    All file-system questions go to `source` (the installed tree by default; facts extracted
    from wheels for a pre-install check)."""

    preloaded: dict[str, Path]
    system_dirs: tuple[str, ...]
    site_packages: Path | None = None
    # which roots (the object a load starts from) the preloaded libraries serve; None: all
    preload_under: Path | None = None
    source: ObjectSource = field(default_factory=DiskSource)
    package_preloads: set[tuple[Path, str]] = field(default_factory=set)
    # (requester, candidate) -> does the requester's package source load the candidate?
    own_loads: Callable[[Path, Path], bool] | None = None
    # package_preloads that nothing in the package's source names (unknown, not read)
    package_preloads_unread: set[tuple[Path, str]] = field(default_factory=set)
    # soname -> file an earlier import left in the process (every root): preloaders.py
    loaded_first: dict[str, Path] = field(default_factory=dict)
    closures: dict[Path, Closure] = field(default_factory=dict)
    _cache: dict[Path, ElfObject | ElfReadError] = field(default_factory=dict)
    # find() per (soname, requester, inherited RPATH, preloads apply): the same library is
    # looked up from hundreds of roots' closures
    _found: dict[tuple[str, Path, tuple[str, ...], bool], ElfObject | None] = field(
        default_factory=dict
    )

    def load(self, path: Path) -> ElfObject:
        """Parse once per file; ElfObject.path is the resolved path."""
        real = self.source.real_path(path)
        hit = self._cache.get(real)
        if hit is None:
            try:
                hit = self.source.read(real)
            except ElfReadError as exc:
                hit = exc
            self._cache[real] = hit
        if isinstance(hit, ElfReadError):
            raise hit
        return hit

    def load_path(self, path: Path) -> Path:
        """The resolved path `load` would use (cached)."""
        return self.source.real_path(path)

    def parsed(self) -> list[ElfObject]:
        """Every object parsed so far (the env's and the host's)."""
        return [o for o in self._cache.values() if isinstance(o, ElfObject)]

    def _listed(self, directory: str, name: str) -> bool:
        return name in self.source.listdir(directory)

    def _candidate(self, path: Path, like: ElfObject) -> ElfObject | None:
        if not self._listed(str(path.parent), path.name):
            return None
        try:
            obj = self.load(path)
        except ElfReadError:
            return None
        if obj.machine != like.machine or obj.elf_class != like.elf_class:
            return None
        return obj

    def find(
        self, soname: str, requester: ElfObject, loaders: Sequence[ElfObject]
    ) -> ElfObject | None:
        root = loaders[-1] if loaders else requester
        return self.find_in(soname, requester, inherited_rpath(loaders), self.preloads_for(root))

    def preloads_for(self, root: ElfObject) -> bool:
        """Do the preloaded libraries serve loads that start from `root`?"""
        return self.preload_under is None or root.path.is_relative_to(self.preload_under)

    def find_in(
        self, soname: str, requester: ElfObject, inherited: tuple[str, ...], preloads: bool
    ) -> ElfObject | None:
        """`find` with the loader chain reduced to what it contributes: the RPATH entries
        ld.so inherits from it (`inherited_rpath`) and whether preloaded libraries apply."""
        key = (soname, requester.path, () if requester.runpath else inherited, preloads)
        if key in self._found:
            return self._found[key]
        found = self._find(soname, requester, key[2], preloads)
        self._found[key] = found
        return found

    def _find(
        self, soname: str, requester: ElfObject, inherited: tuple[str, ...], preloads: bool
    ) -> ElfObject | None:
        if "/" in soname:
            return self._candidate(Path(soname), requester)
        first = self.loaded_first.get(soname)
        if first is not None:
            found = self._candidate(first, requester)
            if found is not None:
                return found
        pre = self.preloaded.get(soname)
        if pre is not None and preloads:
            found = self._candidate(pre, requester)
            if found is not None:
                return found
        for directory in self._dirs_of(requester, inherited):
            if not self._listed(directory, soname):  # no Path objects for the misses
                continue
            found = self._candidate(Path(directory) / soname, requester)
            if found is not None:
                return found
        return self._package_preload(soname, requester)

    def _package_preload(self, soname: str, requester: ElfObject) -> ElfObject | None:
        """A library of the requester's own package, found only because the package loads it
        first (torchaudio's _torchaudio.so needs libtorchaudio.so, no RPATH; torchaudio's
        Python code loads lib/libtorchaudio.so before importing the extension). Looked up in
        the requester's folder and the folders above it, up to the package's top folder."""
        if self.site_packages is None:
            return None
        folder = requester.path.parent
        try:
            depth = len(folder.relative_to(self.site_packages).parts)
        except ValueError:
            return None
        for _ in range(depth):
            for candidate in (folder / soname, folder / "lib" / soname):
                found = self._candidate(candidate, requester)
                if found is not None:
                    self.package_preloads.add((requester.path, soname))
                    if self.own_loads is not None and not self.own_loads(
                        requester.path, found.path
                    ):
                        self.package_preloads_unread.add((requester.path, soname))
                    return found
            folder = folder.parent
        return None

    def _dirs_of(self, requester: ElfObject, inherited: tuple[str, ...]) -> Iterator[str]:
        if not requester.runpath:
            yield from own_rpath(requester)
            yield from inherited  # glibc stops using ancestors' RPATH below an object with RUNPATH
        for entry in requester.runpath:
            yield expand_origin(entry, requester.path.parent)
        yield from self.system_dirs


def own_rpath(obj: ElfObject) -> tuple[str, ...]:
    """The object's DT_RPATH entries, $ORIGIN expanded."""
    return tuple(expand_origin(entry, obj.path.parent) for entry in obj.rpath)


def inherited_rpath(loaders: Sequence[ElfObject]) -> tuple[str, ...]:
    """The DT_RPATH directories a library loaded by `loaders` (its parent first, the root
    last) inherits: each loader's RPATH up to the first loader with a DT_RUNPATH."""
    out: list[str] = []
    for obj in loaders:
        if obj.runpath:
            break
        out.extend(own_rpath(obj))
    return tuple(out)


@dataclass
class Closure:
    """An object's load order (breadth-first, as ld.so builds the local scope) and what is missing."""

    root: ElfObject
    order: list[ElfObject]
    missing: list[tuple[ElfObject, str]]  # (requester, soname nothing provides)


def closure(resolver: Resolver, root: ElfObject) -> Closure:
    """Memoized per root: the same library is the root of many lookups in one env."""
    hit = resolver.closures.get(root.path)
    if hit is None:
        hit = resolver.closures[root.path] = _closure(resolver, root)
    return hit


def _closure(resolver: Resolver, root: ElfObject) -> Closure:
    order: list[ElfObject] = [root]
    seen = {root.path}  # ElfObject paths are already resolved
    # per object: the RPATH entries its DT_NEEDED lookups inherit from its loader chain
    inherits: dict[Path, tuple[str, ...]] = {root.path: ()}
    preloads = resolver.preloads_for(root)
    missing: list[tuple[ElfObject, str]] = []
    queue = [root]
    while queue:
        current = queue.pop(0)
        inherited = inherits[current.path]
        passed = () if current.runpath else own_rpath(current) + inherited
        for soname in current.needed:
            found = resolver.find_in(soname, current, inherited, preloads)
            if found is None:
                missing.append((current, soname))
                continue
            key = found.path
            if key in seen:
                continue
            seen.add(key)
            inherits[key] = passed
            order.append(found)
            queue.append(found)
    return Closure(root=root, order=order, missing=missing)
