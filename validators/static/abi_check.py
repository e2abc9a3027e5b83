"""Resolve every env ELF object's undefined dynamic symbols against its DT_NEEDED closure.

Python dlopens extensions with RTLD_NOW: one strong symbol that no object in the lookup scope
defines fails the import. The scope of an extension is the global scope (the interpreter and
what it loaded RTLD_GLOBAL, e.g. torch's libtorch_global_deps.so) plus the extension's own
breadth-first DT_NEEDED closure. Only objects inside the env are judged; system libraries are
providers. libcuda.so.1 and libnvidia-ml.so.1 come from the driver: on a host without one,
their absence is not an ABI failure, and the driver-API names they would provide are
reported as host-provided rather than missing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from stackgate.installed import Distribution
from validators.elf.elf_symbols import (
    VERSYM_HIDDEN,
    ElfObject,
    ElfReadError,
    Import,
    satisfies,
)
from validators.elf.object_facts import python_tag
from validators.elf.source import DiskSource, ElfReader, ObjectSource
from validators.static.environment import Environment
from validators.static.findings import MissingSoname, MissingSymbol, MissingVersion, ScopeResolved
from validators.static.imports import SourceTree
from validators.static.loader import (
    HOST_PROVIDED,
    Closure,
    Resolver,
    closure,
    system_library_dirs,
)
from validators.static.package_loads import PackageLoads, read_package_loads, record_tree
from validators.static.preloaders import ImportClosure, disk_text, torch_import_closure

# Names libcuda.so.1 / libnvidia-ml.so.1 export (driver API), used only when the driver is absent.
_DRIVER_NAME = re.compile(r"^(cu[A-Z]\w*|nvml\w+)$")
# The Python C API, provided by the interpreter that imports the extension.
_PYTHON_API = re.compile(r"^_?_?Py[A-Z_]\w*$")


@dataclass
class AbiFindings:
    checked_roots: int = 0
    checked_objects: int = 0
    imports_checked: int = 0
    missing_symbols: list[MissingSymbol] = field(default_factory=list)
    missing_sonames: list[MissingSoname] = field(default_factory=list)
    missing_versions: list[MissingVersion] = field(default_factory=list)
    host_provided_symbols: int = 0
    host_provided_names: set[str] = field(default_factory=set)
    python_api_unchecked: int = 0  # no interpreter to check the C API against
    unreadable: list[tuple[Path, str]] = field(default_factory=list)
    # extension modules for another Python (cpython-310 in a 3.12 env): never imported here
    other_python: list[Path] = field(default_factory=list)
    # symbols found only in the scope the package establishes (torch's libraries, its own)
    scope_resolved: list[ScopeResolved] = field(default_factory=list)
    # (root, object in its closure that cannot load): the root goes down with it
    taken_down: list[tuple[Path, Path]] = field(default_factory=list)
    # what an earlier import loads first ("`import torch` (torch 2.6.0) loads 40 libraries")
    loaded_first_by: str | None = None
    # (requester, soname) found only in the requester's own package folder, and nothing in
    # the package's source names it in a load: whether the package loads it first is unknown
    package_loads_unread: list[tuple[Path, str]] = field(default_factory=list)


@dataclass
class _CheckRun:
    """One `check`: its findings and what it has already counted or reported."""

    findings: AbiFindings
    global_objs: list[ElfObject]
    unloadable: set[Path] = field(default_factory=set)
    closures: list[tuple[ElfObject, list[ElfObject]]] = field(default_factory=list)
    seen_sonames: set[tuple[Path, str]] = field(default_factory=set)
    seen_symbols: set[tuple[Path, str, str | None]] = field(default_factory=set)
    seen_versions: set[tuple[Path, str]] = field(default_factory=set)
    checked: set[Path] = field(default_factory=set)


def _site_python(site: Path) -> tuple[int, int] | None:
    """(3, 12) from lib/python3.12/site-packages."""
    name = site.parent.name
    if name.startswith("python3."):
        minor = name.removeprefix("python3.")
        if minor.isdigit():
            return (3, int(minor))
    return None


def preloaded_libraries(site: Path, source: ObjectSource) -> dict[str, Path]:
    """Sonames `import torch` (and nvidia-* wheels) put into the process before extensions load:
    nvidia/*/lib/*.so*, nvidia/*/*/lib/*.so*, then torch/lib/*.so* (first one wins)."""
    nvidia = site / "nvidia"
    one = [nvidia / sub / "lib" for sub in sorted(source.listdir(str(nvidia)))]
    two = [
        nvidia / sub / inner / "lib"
        for sub in sorted(source.listdir(str(nvidia)))
        for inner in sorted(source.listdir(str(nvidia / sub)))
    ]
    out: dict[str, Path] = {}
    for folder in [*one, *two, site / "torch" / "lib"]:
        for name in sorted(source.listdir(str(folder))):
            if ".so" in name:
                out.setdefault(name, folder / name)
    return out


def mangled_stem(name: str) -> str | None:
    """The part of an Itanium-mangled name before its parameter types.

    `_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib` ->
    `_ZN3c104cuda29c10_cuda_check_implementationE`: another overload of the same function
    shares it, which is how a changed signature is found.
    """
    if name.startswith("_ZN"):
        i = 3
        while i < len(name) and name[i] in "KVRO":
            i += 1
        while i < len(name):
            ch = name[i]
            if ch == "E":
                return name[: i + 1]
            if ch.isdigit():
                j = i
                while j < len(name) and name[j].isdigit():
                    j += 1
                i = j + int(name[i:j])
            elif (ch in "CD" and i + 1 < len(name) and name[i + 1] in "0123459") or name.startswith(
                "St", i
            ):
                i += 2
            else:
                return None
        return None
    match = re.match(r"_Z(\d+)", name)
    if match:
        return name[: match.end() + int(match.group(1))]
    return None


class AbiChecker:
    def __init__(
        self,
        env: Environment,
        *,
        system_dirs: tuple[str, ...] | None = None,
        source: ObjectSource | None = None,
        reader: ElfReader | None = None,
        texts: Callable[[Path], str | None] | None = None,
        trees: Callable[[Distribution], SourceTree | None] | None = None,
    ) -> None:
        self.env = env
        self._trees = trees or (lambda dist: record_tree(env.site_packages, dist))
        self._loads: dict[tuple[str, bool], PackageLoads | None] = {}
        self.source: ObjectSource = source if source is not None else DiskSource(reader)
        # what the env ships in nvidia/*/lib and torch/lib: the nvidia libraries find each
        # other that way; any other object only what an earlier import really loaded
        self.shipped = preloaded_libraries(env.site_packages, self.source)
        dirs = system_dirs if system_dirs is not None else system_library_dirs()
        site = self.source.real_path(env.site_packages)
        parsed: dict[Path, ElfObject | ElfReadError] = {}
        self.import_closure: ImportClosure | None = None
        if "torch" in env.distributions:
            # what `import torch` leaves in the process, read from this torch's files
            alone = Resolver({}, dirs, site_packages=site, source=self.source, _cache=parsed)
            init = env.site_packages / "torch" / "__init__.py"
            self.import_closure = torch_import_closure(
                alone, env.site_packages, (texts or disk_text)(init)
            )
            self.import_closure.package = env.distributions["torch"].label()
        self.resolver = Resolver(
            preloaded=self.shipped,
            system_dirs=dirs,
            site_packages=site,
            source=self.source,
            preload_under=self.source.real_path(env.site_packages / "nvidia"),
            loaded_first=self._first(),
            own_loads=self._own_loads,
            _cache=parsed,
        )
        self._own_misses: dict[Path, list[Import]] = {}
        self._python = _site_python(env.site_packages)
        self._package_scopes: dict[str, list[ElfObject]] = {}
        self._by_dist: dict[str, list[Path]] | None = None
        self._torch_libs: list[Path] = []
        self._env_root = self.source.real_path(env.root)
        self._global: list[ElfObject] | None = None

    def _first(self) -> dict[str, Path]:
        """The import closure; a torch with neither torch/_C nor libtorch_global_deps.so (no
        import entry to follow) keeps the earlier rule: its torch/lib serves every root."""
        if self.import_closure is None:
            return {}
        if self.import_closure.loaded:
            return dict(self.import_closure.loaded)
        lib = str(self.env.site_packages / "torch" / "lib")
        return {k: v for k, v in self.shipped.items() if str(v).startswith(lib)}

    def package_loads(self, dist: Distribution) -> PackageLoads | None:
        """What the distribution's own source loads (None: its sources cannot be read, or it
        is torch, whose loads preloaders.py reads with their conditions: its fallback list
        runs only when libtorch_global_deps.so cannot load)."""
        return self._package_loads(dist, every=False)

    def _package_loads(self, dist: Distribution, *, every: bool) -> PackageLoads | None:
        if dist.key == "torch":
            return None
        key = (dist.key, every)
        if key not in self._loads:
            tree = self._trees(dist)
            self._loads[key] = (
                None if tree is None else read_package_loads(dist.label(), tree, every=every)
            )
        return self._loads[key]

    def _own_loads(self, requester: Path, candidate: Path) -> bool:
        """Does the requester's package source name `candidate` in a load? (Resolver asks
        about a library found only in the requester's own package folder.)"""
        dist = self.env.owner(requester)
        if dist is None:
            return False
        # the import-time files first; else every file (a module imported later may load it)
        return any(
            loads is not None and loads.site_for(candidate.name) is not None
            for loads in (
                self._package_loads(dist, every=False),
                self._package_loads(dist, every=True),
            )
        )

    def _in_env(self, obj: ElfObject) -> bool:
        return obj.path.is_relative_to(self._env_root)

    def global_scope(self) -> list[ElfObject]:
        """The interpreter's closure plus libtorch_global_deps.so (torch loads it RTLD_GLOBAL)."""
        if self._global is not None:
            return self._global
        objs: list[ElfObject] = []
        seeds: list[Path] = []
        if self.env.interpreter is not None:
            seeds.append(self.env.interpreter)
        deps = self.env.site_packages / "torch" / "lib" / "libtorch_global_deps.so"
        if deps.name in self.source.listdir(str(deps.parent)):
            seeds.append(deps)
        for seed in seeds:
            try:
                objs.extend(closure(self.resolver, self.resolver.load(seed)).order)
            except ElfReadError:
                continue
        self._global = objs
        return objs

    @staticmethod
    def _unresolved(obj: ElfObject, scope: Iterable[ElfObject]) -> list[Import]:
        """The strong imports no object of `scope` satisfies (a weak undefined symbol may
        stay unresolved: its address is 0). Per provider, the names it defines at all come
        from one set intersection (the smaller side iterated, in C); versions are checked
        only for those (an env has tens of thousands of imports, each against dozens of
        providers)."""
        pending: dict[str, list[Import]] = {}
        for imp in obj.imports:
            if not imp.weak:
                pending.setdefault(imp.name, []).append(imp)
        for provider in scope:
            if not pending:
                break
            exports, multi = provider.exports, provider.multi
            for name in pending.keys() & exports.keys():
                imps = pending[name]
                if (
                    len(imps) == 1
                    and imps[0].version is None
                    and name not in multi
                    and not exports[name] & VERSYM_HIDDEN
                ):
                    del pending[name]  # satisfies()'s common case: one default definition
                    continue
                rest = [imp for imp in imps if not satisfies(provider, imp)]
                if rest:
                    pending[name] = rest
                else:
                    del pending[name]
        return [imp for imp in obj.imports if imp in pending.get(imp.name, ())]

    def is_extension(self, path: Path) -> bool:
        """A Python extension module (what `import` dlopens), as opposed to a bundled library."""
        name = path.name
        if ".cpython-" in name or ".abi3." in name or name.endswith(".abi3.so"):
            return True
        try:
            return self.resolver.load(path).exports_python_module()
        except ElfReadError:
            return False

    def split_roots(self, paths: Iterable[Path]) -> tuple[list[Path], list[Path]]:
        """(extensions, libraries no extension loads): the latter are plugins loaded on demand
        (e.g. nvshmem's MPI bootstrap needs libmpi only when MPI is used)."""
        paths = list(paths)
        extensions = [p for p in paths if self.is_extension(p)]
        reached: set[Path] = set()
        for ext in extensions:
            try:
                cl = closure(self.resolver, self.resolver.load(ext))
            except ElfReadError:
                continue
            reached.update(o.path for o in cl.order)
        ext_set = set(extensions)
        plugins = [
            p for p in paths if p not in ext_set and self.resolver.load_path(p) not in reached
        ]
        return extensions, plugins

    def other_python(self, path: Path) -> bool:
        """An extension module tagged for another Python than the env's (never imported)."""
        tag = python_tag(path.name)
        return tag is not None and self._python is not None and tag != self._python

    def package_scope(self, obj: ElfObject) -> list[ElfObject]:
        """What the object's package makes available before loading it, beyond its DT_NEEDED
        closure: torch's libraries (torch extensions and packages that load torch._C with
        RTLD_GLOBAL, as cuda-core does for its aoti_torch_* imports) and the libraries its
        own distribution ships (packages that ctypes-load their own lib/ first)."""
        label = self.env.owner_label(obj.path)
        hit = self._package_scopes.get(label)
        if hit is not None:
            return hit
        if self._by_dist is None:
            self._by_dist = {}
            torch_dir = self.source.real_path(self.env.site_packages / "torch")
            for p in self.env.shared_objects():
                owner = self.env.owner(p)
                if owner is not None:
                    self._by_dist.setdefault(owner.key, []).append(p)
                if self.source.real_path(p).is_relative_to(torch_dir) and (
                    ".so." in p.name or p.name.startswith(("lib", "_C"))
                ):
                    self._torch_libs.append(p)
        dist = self.env.owner(obj.path)
        paths = list(self._by_dist.get(dist.key, [])) if dist is not None else []
        paths += self._torch_libs
        scope: list[ElfObject] = []
        for path in dict.fromkeys(paths):
            try:
                scope.append(self.resolver.load(path))
            except ElfReadError:
                continue
        self._package_scopes[label] = scope
        return scope

    def check(self, roots: Iterable[Path]) -> AbiFindings:
        findings = AbiFindings()
        if self.import_closure is not None:
            findings.loaded_first_by = self.import_closure.describe()
        run = _CheckRun(findings, self.global_scope())
        for root_path in roots:
            self._check_root(root_path, run)
        findings.package_loads_unread = sorted(self.resolver.package_preloads_unread)
        run.unloadable.update(v.requester for v in findings.missing_versions)
        if run.unloadable:
            self._taken_down(run.closures, run.unloadable, findings)
        return findings

    def _check_root(self, root_path: Path, run: _CheckRun) -> None:
        """One root: the sonames its closure lacks, then each env object of the closure: its
        versions and the imports neither its own closure nor the global scope defines."""
        findings = run.findings
        if self.other_python(root_path):
            findings.other_python.append(root_path)
            return
        try:
            root = self.resolver.load(root_path)
        except ElfReadError as exc:
            findings.unreadable.append((root_path, exc.reason))
            return
        findings.checked_roots += 1
        cl = closure(self.resolver, root)
        run.closures.append((root, cl.order))
        host_missing = self._missing_sonames(cl, run)
        scope = [*cl.order, *run.global_objs]
        by_name: dict[str, ElfObject] = {}
        for o in cl.order:
            by_name.setdefault(o.path.name, o)
            if o.soname:
                by_name.setdefault(o.soname, o)
        for obj in cl.order:
            if not self._in_env(obj):
                continue
            if obj.path not in run.checked:
                run.checked.add(obj.path)
                findings.checked_objects += 1
                findings.imports_checked += len(obj.imports)
            self._check_versions(obj, by_name, findings, run.seen_versions)
            misses = self._own_misses.get(obj.path)
            if misses is None:
                own = closure(self.resolver, obj).order if obj is not root else cl.order
                misses = self._unresolved(obj, [*own, *run.global_objs])
                self._own_misses[obj.path] = misses
            for imp in misses:
                if not any(satisfies(p, imp) for p in scope if imp.name in p.exports):
                    self._unresolved_import(imp, obj, root, cl.order, bool(host_missing), run)

    def _missing_sonames(self, cl: Closure, run: _CheckRun) -> set[str]:
        """Report each (requester, soname) nothing in the closure provides once; the missing
        sonames the host's driver provides."""
        host_missing = set()
        for requester, soname in cl.missing:
            host = soname in HOST_PROVIDED
            if host:
                host_missing.add(soname)
            key = (requester.path, soname)
            if key not in run.seen_sonames:
                run.seen_sonames.add(key)
                run.findings.missing_sonames.append(
                    MissingSoname(requester.path, soname, host, self.shipped.get(soname))
                )
        return host_missing

    def _unresolved_import(
        self,
        imp: Import,
        obj: ElfObject,
        root: ElfObject,
        order: list[ElfObject],
        driver_missing: bool,
        run: _CheckRun,
    ) -> None:
        """An import nothing in the root's scope defines: the C API with no interpreter to
        check it against, a driver-API name with the driver absent, a name the package's own
        scope provides, else a missing symbol (and the object cannot load)."""
        findings = run.findings
        if self.env.interpreter is None and _PYTHON_API.match(imp.name):
            findings.python_api_unchecked += 1
            return
        if driver_missing and imp.version is None and _DRIVER_NAME.match(imp.name):
            findings.host_provided_symbols += 1
            findings.host_provided_names.add(imp.name)
            return
        key = (obj.path, imp.name, imp.version)
        if key in run.seen_symbols:
            return
        run.seen_symbols.add(key)
        scoped = next(
            (p for p in self.package_scope(obj) if imp.name in p.exports and satisfies(p, imp)),
            None,
        )
        if scoped is not None:
            findings.scope_resolved.append(ScopeResolved(obj.path, imp.name, scoped.path))
            return
        run.unloadable.add(obj.path)
        expected, where, near = self._expected_provider(imp, obj, order)
        findings.missing_symbols.append(
            MissingSymbol(
                importer=obj.path,
                root=root.path,
                symbol=imp.name,
                version=imp.version,
                expected_from=expected,
                expected_path=where,
                near_misses=near,
                version_file=imp.version_file,
            )
        )

    def _taken_down(
        self,
        closures: list[tuple[ElfObject, list[ElfObject]]],
        unloadable: set[Path],
        findings: AbiFindings,
    ) -> None:
        """Every env object (root or library) whose closure holds a broken object of another
        distribution goes down with it: ld.so fails the whole load."""
        seen: set[Path] = set()
        for _root, order in closures:
            for obj in order:
                if obj.path in seen or obj.path in unloadable or not self._in_env(obj):
                    continue
                seen.add(obj.path)
                mine = self.env.owner(obj.path)
                for dep in closure(self.resolver, obj).order[1:]:
                    if dep.path in unloadable and self.env.owner(dep.path) is not mine:
                        findings.taken_down.append((obj.path, dep.path))
                        break
        # objects that take symbols from their package's scope (no DT_NEEDED) go down with
        # the provider (libtorch_nvshmem.so with libtorch_cuda.so)
        down = {obj: broken for obj, broken in findings.taken_down}
        down.update({p: p for p in unloadable})
        for scoped in findings.scope_resolved:
            if scoped.importer in down or scoped.importer in unloadable:
                continue
            cause = down.get(scoped.provider)
            if cause is not None:
                findings.taken_down.append((scoped.importer, cause))
                down[scoped.importer] = cause

    @staticmethod
    def _check_versions(
        obj: ElfObject,
        by_name: dict[str, ElfObject],
        findings: AbiFindings,
        seen: set[tuple[Path, str]],
    ) -> None:
        """ld.so: "version `X' not found (required by Y)" when a DT_NEEDED file lacks a node."""
        for file, versions in obj.version_needs.items():
            provider = by_name.get(file)
            if provider is None or not provider.has_versions:
                continue
            for version in sorted(versions - provider.version_defs):
                key = (obj.path, f"{file}:{version}")
                if key not in seen:
                    seen.add(key)
                    findings.missing_versions.append(
                        MissingVersion(obj.path, provider.path, version)
                    )

    @staticmethod
    def _expected_provider(
        imp: Import, obj: ElfObject, order: list[ElfObject]
    ) -> tuple[str | None, Path | None, tuple[str, ...]]:
        if imp.version_file is not None:
            for cand in order:
                if imp.version_file in (cand.soname, cand.path.name):
                    return imp.version_file, cand.path, ()
            return imp.version_file, None, ()
        stem = mangled_stem(imp.name)
        if stem is None:
            return None, None, ()
        needed = set(obj.needed)
        best: tuple[str | None, Path | None, tuple[str, ...]] = (None, None, ())
        for cand in order[1:]:
            near = tuple(n for n in cand.names_with_prefix(stem) if n != imp.name)
            if near:
                name = cand.soname or cand.path.name
                if name in needed or best[0] is None:
                    best = (name, cand.path, near)
                if name in needed:
                    break
        return best
