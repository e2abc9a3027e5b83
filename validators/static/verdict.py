"""From raw ABI findings to one verdict per distribution: FAIL / WARN / INFO, with the reason.

Classes:
- symbols or version nodes that nothing in the object's scope defines: FAIL candidates; the
  confirming load decides (loads: INFO "refuted", fails: FAIL with both pieces of evidence);
- an object that cannot load because a library *below* it (another distribution's) is broken:
  the root's distribution is "taken down" (FAIL, the root cause named first);
- DT_NEEDED files absent from env and host: a variant built for another CUDA major when a
  sibling variant resolves (INFO), otherwise an optional dependency or host-library backend
  (WARN) unless importing the package fails on it (FAIL);
- extension modules for another Python ABI: never imported (INFO);
- an unmet requirement on a distribution whose libraries the package links (a torchvision
  built for another torch): confirmed by loading the package's modules; a crash is FAIL
  "crashes at load", a clean load INFO.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from stackgate.installed import Distribution
from validators.elf.file_facts_cache import FileFactsCache, file_identity
from validators.static.abi_check import AbiFindings
from validators.static.confirm import Step, StepResult
from validators.static.dist_check import applicable_requirements
from validators.static.environment import Environment
from validators.static.findings import (
    MissingSoname,
    MissingSymbol,
    MissingVersion,
    PackageFindings,
    by_package,
)
from validators.static.imports import (
    SourceTree,
    import_time_modules,
    installed_top_levels,
    undeclared_imports,
)
from validators.static.package_loads import PackageLoads, record_tree

Severity = Literal["FAIL", "WARN", "INFO", "PASS"]
# build tags of runtime-chosen variants: cu12/, _cu13, _cuda128, -torch29 (one build per CUDA
# major or per torch minor, the package loads the one matching the process)
_CUDA_TAG = re.compile(r"(?:[_.-]?(?:cu|cuda)\d{2,3}x?)|(?:[_.-]?torch\d{2,3})|(?:^cu\d{2,3}$)")


# Libraries whose soname major is the CUDA major they belong to (libcudart.so.12 is CUDA 12).
# Not cuDNN (8, 9), cuFFT (11 in CUDA 12), cuRAND (10), cuSOLVER (11 in CUDA 12), NCCL (2).
CUDA_MAJOR_SONAMES = frozenset(
    {
        "libcudart",
        "libcublas",
        "libcublasLt",
        "libnvrtc",
        "libnvJitLink",
        "libcusparse",
        "libcupti",
        "libnvblas",
        "libnppc",
        "libnvjpeg",
    }
)


def cuda_major_of(soname: str) -> int | None:
    """12 for libcublas.so.12: the CUDA major a soname names, for the libraries whose major is
    CUDA's; None for the others (libcudnn.so.8 is cuDNN 8, not a CUDA-8 build)."""
    base, _, major = soname.rpartition(".so.")
    if base not in CUDA_MAJOR_SONAMES or not major.split(".")[0].isdigit():
        return None
    return int(major.split(".")[0])


def variant_key(path: Path, site: Path) -> str:
    """The module's name with CUDA-major tags removed (cu12/ and _cu13 are one module)."""
    try:
        parts = path.relative_to(site).parts
    except ValueError:
        parts = path.parts
    kept = [p for p in parts[:-1] if not _CUDA_TAG.fullmatch(p)]
    return "/".join([*kept, _CUDA_TAG.sub("", parts[-1])])


_TORCH_TAG = re.compile(r"[_.-]torch(\d)(\d{1,2})(?=[_.-])")


def torch_tag(name: str) -> tuple[int, int] | None:
    """(2, 9) for libtorch_c_dlpack_addon_torch29-cpu.so: a build for that torch only."""
    match = _TORCH_TAG.search(name)
    return (int(match.group(1)), int(match.group(2))) if match else None


def installed_torch(env: Environment) -> tuple[int, int] | None:
    dist = env.distributions.get("torch")
    if dist is None:
        return None
    try:
        release = Version(dist.version).release
    except InvalidVersion:
        return None
    return (release[0], release[1]) if len(release) >= 2 else None


def _plain(path: Path, site: Path) -> str:
    try:
        return "/".join(path.relative_to(site).parts)
    except ValueError:
        return str(path)


@dataclass
class PackageVerdict:
    label: str
    dist: Distribution | None
    extensions: int = 0
    symbols: list[MissingSymbol] = field(default_factory=list)
    versions: list[MissingVersion] = field(default_factory=list)
    needed_sonames: list[MissingSoname] = field(default_factory=list)  # FAIL candidates
    optional_sonames: list[MissingSoname] = field(default_factory=list)  # WARN
    variant_sonames: list[MissingSoname] = field(default_factory=list)  # INFO
    other_python: list[Path] = field(default_factory=list)  # INFO
    variant_objects: list[Path] = field(default_factory=list)  # INFO: unused variant builds
    taken_down_by: list[tuple[Path, Path]] = field(default_factory=list)  # (root, broken obj)
    takes_down: set[str] = field(default_factory=set)  # labels of distributions it breaks
    unmet: list[str] = field(default_factory=list)  # requirements on linked distributions
    needed_because: list[str] = field(default_factory=list)  # why absent libraries are needed
    loads: list[StepResult] = field(default_factory=list)  # confirming-load evidence
    confirmed: bool | None = None  # None: no load ran
    # modules its import-time code imports that are not installed and not declared: {name: file}
    undeclared: dict[str, Path] = field(default_factory=dict)
    undeclared_failed: list[str] = field(default_factory=list)  # ... that `import` failed on
    # extension modules (dotted name) that cannot load, with the DT_NEEDED sonames they lack
    modules_lacking: dict[str, list[str]] = field(default_factory=dict)
    # the package's top-level modules and, of modules_lacking, those its import-time Python
    # imports reach (the same walk over the installed files or the wheel's members); None:
    # its sources could not be read
    import_walk: tuple[list[str], set[str]] | None = None
    # what its own source says about loading the libraries it lacks (package_loads.py):
    # INFO, a miss its own import loads first; WARN, a library only its package folder holds
    # that nothing in its source names (unknown); notes added to the FAIL/WARN text
    loaded_by_own_import: list[str] = field(default_factory=list)
    own_loads_unknown: list[str] = field(default_factory=list)
    load_notes: list[str] = field(default_factory=list)

    @property
    def loaded_impact(self) -> Literal["BROKEN", "DEGRADED"] | None:
        """From the confirming load: BROKEN when importing the package's top-level modules
        fails, DEGRADED when they import; None when no import ran."""
        if not self.modules_lacking:
            return None
        imports = [r for r in self.loads if r.step.kind == "import" and r.step.name != "torch"]
        if not imports and self.label.split(" ")[0] == "torch":
            imports = [r for r in self.loads if r.step.kind == "import"]
        if not imports:
            return None
        return "BROKEN" if any(r.outcome != "ok" for r in imports) else "DEGRADED"

    @property
    def walked_impact(self) -> Literal["BROKEN", "DEGRADED"] | None:
        """From the sources: BROKEN when an import-time import reaches a module that cannot
        load, DEGRADED when none does; None when the sources were not read."""
        if not self.modules_lacking or self.import_walk is None or not self.import_walk[0]:
            return None
        return "BROKEN" if self.import_walk[1] else "DEGRADED"

    @property
    def impact(self) -> Literal["BROKEN", "DEGRADED"] | None:
        """With modules that cannot load: does the package's top-level import still work?
        A load decides where one ran, else the import-time walk of its sources."""
        return self.loaded_impact or self.walked_impact

    @property
    def candidates(self) -> bool:
        """Static evidence of a break (before any load)."""
        return bool(self.symbols or self.versions or self.needed_sonames or self.taken_down_by)

    @property
    def crashed(self) -> list[StepResult]:
        return [r for r in self.loads if r.outcome in ("crash", "timeout")]

    @property
    def stub_crashes(self) -> list[StepResult]:
        """Crashes at load seen only under the stub driver, with no real userland to confirm."""
        return [r for r in self.loads if r.outcome == "stub-crash"]

    @property
    def severity(self) -> Severity:
        if self.crashed or self.undeclared_failed:
            return "FAIL"
        if self.candidates:
            return "FAIL" if self.confirmed is not False else "INFO"
        if self.confirmed is True:  # an import failed on an "optional" library
            return "FAIL"
        if (
            self.optional_sonames
            or self.undeclared_unconfirmed
            or self.stub_crashes
            or self.own_loads_unknown
        ):
            return "WARN"
        if (
            self.variant_sonames
            or self.variant_objects
            or self.other_python
            or self.unmet
            or self.loaded_by_own_import
        ):
            return "INFO"
        return "PASS"

    @property
    def undeclared_unconfirmed(self) -> dict[str, Path]:
        """Undeclared imports no `import` of the package was run to confirm or refute."""
        if any(r.step.kind == "import" and r.step.name != "torch" for r in self.loads):
            return {}
        return self.undeclared

    def objects_to_confirm(self) -> list[Path]:
        out = [m.importer for m in self.symbols] + [v.requester for v in self.versions]
        out += [m.requester for m in self.needed_sonames]
        out += [root for root, _ in self.taken_down_by]
        return list(dict.fromkeys(out))


def _unmet_linked(env: Environment, dist: Distribution, with_libs: set[str]) -> list[str]:
    """Requirements of `dist` on an installed distribution that ships ELF files, unmet by the
    installed version (`torch==2.8.0` with torch 2.9.1 installed)."""
    out: list[str] = []
    for req in applicable_requirements(env, dist):
        key = canonicalize_name(req.name)
        other = env.distributions.get(key)
        if other is None or key not in with_libs or not req.specifier:
            continue
        try:
            ok = req.specifier.contains(Version(other.version), prereleases=True)
        except InvalidVersion:
            continue
        if not ok:
            out.append(f"requires {req.name}{req.specifier}, {other.label()} installed")
    return out


def _absent_requirements(env: Environment, dist: Distribution | None) -> list[str]:
    """Distributions `dist` requires (not as an extra) that are not installed: a library of
    its that the env lacks is then a missing dependency, not an optional backend."""
    if dist is None:
        return []
    return [
        f"{req.name}{req.specifier}"
        for req in applicable_requirements(env, dist)
        if canonicalize_name(req.name) not in env.distributions
    ]


@dataclass(frozen=True)
class _Scope:
    """What classify knows of the whole env when it judges one package."""

    env: Environment
    findings: AbiFindings
    shipped: set[str]
    resolved_keys: set[str]  # variant keys of roots whose libraries all resolve
    clean_keys: set[str]  # variant keys of roots with no finding at all
    load_bearing: dict[Path, set[str]]  # library -> the packages whose objects it takes down
    loads: Callable[[Distribution], PackageLoads | None] | None

    @property
    def site(self) -> Path:
        return self.env.site_packages


def classify(
    env: Environment,
    findings: AbiFindings,
    roots: Iterable[Path],
    shipped: set[str],
    *,
    deep: bool = False,
    cache: FileFactsCache | None = None,
    loads: Callable[[Distribution], PackageLoads | None] | None = None,
) -> dict[str, PackageVerdict]:
    """`shipped`: library file names the env ships (to recognise another CUDA major);
    `loads`: what a distribution's own source loads (package_loads.py)."""
    roots = list(roots)
    grouped = by_package(
        env, roots, findings.missing_symbols, findings.missing_sonames, findings.missing_versions
    )
    site = env.site_packages
    unresolved_roots = {m.requester for m in findings.missing_sonames if not m.host_provided}
    out: dict[str, PackageVerdict] = {}

    def verdict(label: str) -> PackageVerdict:
        found = out.get(label)
        if found is None:
            dist = next((d for d in env.distributions.values() if d.label() == label), None)
            found = out[label] = PackageVerdict(label, dist)
        return found

    # a library whose absence breaks another distribution's objects is not optional
    load_bearing: dict[Path, set[str]] = {}
    for root, broken in findings.taken_down:
        load_bearing.setdefault(broken, set()).add(env.owner_label(root))
    broken_roots = unresolved_roots | {m.importer for m in findings.missing_symbols}
    broken_roots |= {m.requester for m in findings.missing_versions}
    scope = _Scope(
        env,
        findings,
        shipped,
        resolved_keys={variant_key(r, site) for r in roots if r not in unresolved_roots},
        clean_keys={variant_key(r, site) for r in roots if r not in broken_roots},
        load_bearing=load_bearing,
        loads=loads,
    )
    for label, pkg in grouped.items():
        _package_verdict(scope, verdict(label), pkg)
    _env_wide_findings(env, findings, verdict)
    _requirement_findings(env, roots, verdict, deep=deep, cache=cache)
    return dict(sorted(out.items()))


def _package_verdict(scope: _Scope, v: PackageVerdict, pkg: PackageFindings) -> None:
    """One package's findings sorted into the verdict: variant builds set aside, symbols that
    follow from an absent library dropped, each absent library needed or optional."""
    env, site = scope.env, scope.site
    v.extensions = pkg.extensions
    _set_variants_aside(scope, v, pkg)
    absent = pkg.absent_sonames()
    # an object with an absent DT_NEEDED library cannot load whatever its symbols; the
    # symbols it misses (versioned against that library or not) follow from the absence
    lacking = {m.requester for m in pkg.sonames}
    v.symbols = [
        m for m in pkg.symbols if m.version_file not in absent and m.importer not in lacking
    ]
    v.versions = list(pkg.versions)
    missing_by_obj: dict[Path, list[MissingSoname]] = {}
    for m in pkg.sonames:
        missing_by_obj.setdefault(m.requester, []).append(m)
    # read only where it can matter: a lacked library the env holds somewhere
    shipped_miss = any(m.installed_at is not None for m in pkg.sonames)
    loads = scope.loads
    own = loads(v.dist) if loads and v.dist is not None and shipped_miss else None
    if own is not None:
        missing_by_obj = _own_import_loads(v, own, missing_by_obj, site)
    needed_misses, optional_misses = _needed_or_optional(scope, v, missing_by_obj)
    if own is not None:
        v.needed_because += _own_load_notes(own, needed_misses)
        v.load_notes += _own_load_notes(own, optional_misses)
    v.needed_because = list(dict.fromkeys(v.needed_because))
    for obj, misses in missing_by_obj.items():
        module = _module_name(obj, site) if is_python_extension_path(obj, env) else None
        if module is not None and any(m in v.needed_sonames for m in misses):
            v.modules_lacking[module] = sorted({m.soname for m in misses})


def _set_variants_aside(scope: _Scope, v: PackageVerdict, pkg: PackageFindings) -> None:
    """A variant whose sibling build resolves, or a build for another torch: the package picks
    the matching one at run time, so its symbols and versions are no finding."""
    env, site = scope.env, scope.site
    tagged = {
        o
        for o in {m.importer for m in pkg.symbols} | {x.requester for x in pkg.versions}
        if variant_key(o, site) in scope.clean_keys and variant_key(o, site) != _plain(o, site)
    }
    torch_version = installed_torch(env)
    tagged |= {
        o
        for o in {m.importer for m in pkg.symbols} | {x.requester for x in pkg.versions}
        if (tag := torch_tag(o.name)) is not None
        and torch_version is not None
        and tag != torch_version
    }
    if tagged:
        v.variant_objects.extend(sorted(tagged))
        pkg.symbols = [m for m in pkg.symbols if m.importer not in tagged]
        pkg.versions = [x for x in pkg.versions if x.requester not in tagged]


def _needed_or_optional(
    scope: _Scope, v: PackageVerdict, missing_by_obj: dict[Path, list[MissingSoname]]
) -> tuple[list[MissingSoname], list[MissingSoname]]:
    """Each object's absent libraries: a sibling variant's, needed (with the reason), or
    optional. Returns the needed and the optional ones that `_own_load_notes` explains."""
    env, site, findings = scope.env, scope.site, scope.findings
    absent_dists = _absent_requirements(env, v.dist)
    needed_misses: list[MissingSoname] = []
    optional_misses: list[MissingSoname] = []
    for obj, misses in missing_by_obj.items():
        other_major = any(
            cuda_major_of(m.soname) is not None
            and any(
                s.startswith(m.soname.rpartition(".so.")[0] + ".so.") and s != m.soname
                for s in scope.shipped
            )
            for m in misses
        )
        if variant_key(obj, site) in scope.resolved_keys:  # a sibling variant resolves
            v.variant_sonames.extend(misses)
        elif all(m.installed_at for m in misses) and is_python_extension_path(obj, env):
            # an extension module beside the wheel of its library (cupy's cublas module beside
            # nvidia-cublas-cu12, no torch): `import` searches RUNPATH and the system path,
            # and nothing loaded the library first
            v.needed_sonames.extend(misses)
            names = ", ".join(sorted({m.soname for m in misses}))
            first = (
                f"{findings.loaded_first_by}, not {names}"
                if findings.loaded_first_by
                else f"no import in the env loads {names} first (no torch)"
            )
            v.needed_because.append(
                f"{obj.name} is an extension module; {first}, and its RUNPATH does not reach them"
            )
            needed_misses += misses
        elif other_major:
            v.needed_sonames.extend(misses)
        elif obj in scope.load_bearing or absent_dists:
            v.needed_sonames.extend(misses)
            if obj in scope.load_bearing:
                v.needed_because.append(
                    f"{obj.name} is below {', '.join(sorted(scope.load_bearing[obj]))}"
                )
            if absent_dists:
                v.needed_because.append(
                    f"{v.label} requires {', '.join(absent_dists)}, not installed"
                )
        else:
            v.optional_sonames.extend(misses)
            optional_misses += misses
    return needed_misses, optional_misses


def _env_wide_findings(
    env: Environment, findings: AbiFindings, verdict: Callable[[str], PackageVerdict]
) -> None:
    """Findings that name a package from outside its own objects: libraries its source may
    load unread, modules for another Python, objects taken down by a library below them."""
    for requester, soname in findings.package_loads_unread:
        verdict(env.owner_label(requester)).own_loads_unknown.append(
            f"{requester.name} needs {soname}, which only its own package folder holds (no "
            "RUNPATH reaches it) and nothing in its source names in a load: whether the "
            "package loads it first is unknown"
        )
    for path in findings.other_python:
        verdict(env.owner_label(path)).other_python.append(path)
    for root, broken in findings.taken_down:
        v = verdict(env.owner_label(root))
        v.taken_down_by.append((root, broken))
        verdict(env.owner_label(broken)).takes_down.add(v.label)


def _requirement_findings(
    env: Environment,
    roots: list[Path],
    verdict: Callable[[str], PackageVerdict],
    *,
    deep: bool,
    cache: FileFactsCache | None,
) -> None:
    """Per distribution with objects: its unmet requirements and its undeclared imports."""
    site = env.site_packages
    with_libs = {d.key for p in env.shared_objects() if (d := env.owner(p)) is not None}
    installed, env_python = import_scan_inputs(env)
    seen: set[str] = set()
    for p in roots:
        dist = env.owner(p)
        if dist is None or dist.key in seen:
            continue
        seen.add(dist.key)
        unmet = _unmet_linked(env, dist, with_libs)
        if unmet or deep:
            verdict(dist.label()).unmet = unmet
        missing = _undeclared(site, dist, installed, cache, env_python)
        if missing:
            verdict(dist.label()).undeclared = missing


def _own_import_loads(
    v: PackageVerdict,
    own: PackageLoads,
    missing_by_obj: dict[Path, list[MissingSoname]],
    site: Path,
) -> dict[Path, list[MissingSoname]]:
    """Drop the misses an env file serves because the package's own import loads it first
    (its source names the file in a load that runs at import): INFO, with where it is read."""
    kept: dict[Path, list[MissingSoname]] = {}
    for obj, misses in missing_by_obj.items():
        rest = []
        for m in misses:
            hit = own.site_for(m.installed_at.name) if m.installed_at is not None else None
            if (
                hit is not None
                and hit.entry is None
                and m.installed_at is not None
                and hit.names_folder(m.installed_at)
            ):
                v.loaded_by_own_import.append(
                    f"{obj.name} needs {m.soname}: {own.label.split(' ')[0]}'s own import loads "
                    f"{_plain(m.installed_at, site)} first ({hit.where()})"
                )
            else:
                rest.append(m)
        if rest:
            kept[obj] = rest
    return kept


def _own_load_notes(own: PackageLoads, misses: Iterable[MissingSoname]) -> list[str]:
    """What the package's source says about loading the libraries its objects lack: loads
    that run only when a function is called (one note per function), and loads of computed
    paths at import, whose targets a reading of the source cannot know."""
    name = own.label.split(" ")[0]
    later: dict[tuple[str, str], list[str]] = {}
    unread: list[str] = []
    elsewhere: list[str] = []  # loaded at import from a folder the source computes
    for soname in sorted({m.soname for m in misses}):
        hit = own.site_for(soname)
        if hit is not None and hit.entry is not None:
            later.setdefault((hit.entry, hit.member), []).append(soname)
        elif hit is not None:
            elsewhere.append(f"{soname} ({hit.where()})")
        else:
            unread.append(soname)
    notes = [
        f"{name} loads {', '.join(sonames)} only when `{entry}()` is called ({member}), "
        "not at import"
        for (entry, member), sonames in sorted(later.items())
    ]
    if elsewhere:
        notes.append(
            f"{name} loads {', '.join(elsewhere)} at import from a folder its source computes: "
            "whether that is the env's copy is unknown, so it is not counted as loaded first"
        )
    computed = [c for c in own.computed if c.entry is None]
    if computed and unread:
        notes.append(
            f"{name} loads computed paths at import ({', '.join(c.where() for c in computed[:3])}):"
            f" whether they include {', '.join(unread)} is unknown to a reading of its source"
        )
    return notes


def installed_tree(site: Path, dist: Distribution) -> SourceTree | None:
    """The installed distribution's files (its RECORD) for the import-time walk."""
    return record_tree(site, dist)


def walk_imports(
    verdicts: dict[str, PackageVerdict], trees: Callable[[Distribution], SourceTree | None]
) -> None:
    """For each package with modules that cannot load: which of them `import TOP` reaches."""
    for v in verdicts.values():
        if not v.modules_lacking or v.dist is None:
            continue
        tree = trees(v.dist)
        if tree is None:
            continue
        tops = tree.tops()
        reached = import_time_modules(tops, tree.text_of, tree.names)
        v.import_walk = (tops, set(v.modules_lacking) & reached)


def import_scan_inputs(env: Environment) -> tuple[set[str], tuple[int, int] | None]:
    """What the undeclared-import scan judges against: the env's importable top-level names
    and its Python's (major, minor)."""
    installed = installed_top_levels(env.site_packages)
    major, _, minor = env.marker_env().get("python_version", "").partition(".")
    env_python = (int(major), int(minor)) if major.isdigit() and minor.isdigit() else None
    return installed, env_python


def scan_undeclared(
    site: Path,
    dist: Distribution,
    installed: set[str],
    python: tuple[int, int] | None,
    cache: FileFactsCache,
) -> None:
    """Put a distribution's undeclared imports in `cache` (a worker of prefetch.py does this
    before classify asks)."""
    _undeclared(site, dist, installed, cache, python)


def _undeclared(
    site: Path,
    dist: Distribution,
    installed: set[str],
    cache: FileFactsCache | None,
    python: tuple[int, int] | None,
) -> dict[str, Path]:
    """undeclared_imports of the distribution, cached by the identity of its RECORD (a
    reinstall rewrites it) and of the installed names (an install beside it changes them)."""
    record = file_identity(dist.dist_info / "RECORD")
    key = f"{record}:{python}:{sorted(installed)}" if record is not None else None
    if cache is not None and key is not None:
        hit = cache.get("imports", key)
        if isinstance(hit, dict):
            return {str(k): Path(str(v)) for k, v in hit.items()}
    found = undeclared_imports(site, top_levels(dist, site), installed, python)
    if cache is not None and key is not None:
        cache.put("imports", key, {k: str(v) for k, v in found.items()})
    return found


# --- confirming loads ----------------------------------------------------------------------

_ABI_ERROR = ("undefined symbol", "version `", "cannot open shared object file")
# What a load can find that the symbol check cannot: a symbol or version ld.so cannot bind, or
# a Cython cross-module C API that does not match (cuda-core against another cuda-bindings).
# A missing file is not on this list: the static check resolves files, and one it found that
# a bare dlopen does not is one the package loads first itself (torchaudio's CTC decoder).
_LOAD_ONLY_ERROR = (
    "undefined symbol",
    "version `",
    "does not export expected C function",
    "has wrong signature",
)


def _module_name(path: Path, site: Path) -> str | None:
    try:
        rel = path.relative_to(site)
    except ValueError:
        return None
    return ".".join([*rel.parts[:-1], rel.name.split(".", 1)[0]])


def _step_for(path: Path, env: Environment) -> Step:
    if is_python_extension_path(path, env):
        name = _module_name(path, env.site_packages)
        if name is not None:
            return Step("extension", name, str(path))
    return Step("library", path.name, str(path))


def is_python_extension_path(path: Path, env: Environment) -> bool:
    name = path.name
    return ".cpython-" in name or ".abi3." in name or name.endswith(".abi3.so")


def plan(
    env: Environment,
    verdicts: dict[str, PackageVerdict],
    roots_by_label: dict[str, list[Path]],
    *,
    deep: bool,
    scoped: frozenset[Path] = frozenset(),
) -> tuple[list[Step], dict[str, list[Step]]]:
    """The steps of one confirming run and, per package, the steps that are its evidence.
    Objects that take symbols from torch without DT_NEEDED (`scoped`) load last, after
    torch._C is made global, the way their packages load them (cuda-core's _tensor_bridge)."""
    steps: list[Step] = []
    late: list[tuple[str, Step]] = []
    mine: dict[str, list[Step]] = {}
    if "torch" in env.distributions:
        steps.append(Step("import", "torch"))
        mine.setdefault(env.distributions["torch"].label(), []).append(steps[0])
    for label, v in verdicts.items():
        objects = v.objects_to_confirm()
        if v.unmet or deep:
            objects += roots_by_label.get(label, [])
        wants_import = bool(objects or v.optional_sonames or v.needed_sonames or v.undeclared)
        if not wants_import:
            continue
        own: list[Step] = []
        if v.dist is not None:
            own += [Step("import", top) for top in top_levels(v.dist, env.site_packages)]
        torch = installed_torch(env)
        own += [
            _step_for(p, env)
            for p in dict.fromkeys(objects)
            if p not in v.other_python
            and p not in v.variant_objects
            and not ((tag := torch_tag(p.name)) is not None and torch is not None and tag != torch)
        ]
        own = [s for s in own if s not in steps]
        late += [(label, s) for s in own if s.path and Path(s.path) in scoped]
        own = [s for s in own if not (s.path and Path(s.path) in scoped)]
        steps.extend(own)
        mine[label] = [*mine.get(label, []), *own]
    if late:
        if "torch" in env.distributions:
            steps.append(Step("global", "torch._C"))
        for label, step in late:
            steps.append(step)
            mine[label] = [*mine.get(label, []), step]
    return steps, mine


def top_levels(dist: Distribution, site: Path) -> list[str]:
    """Importable top-level packages of a distribution (top_level.txt, else its RECORD)."""
    names: list[str] = []
    top = dist.dist_info / "top_level.txt"
    try:
        if top.is_file():
            names = [n.strip() for n in top.read_text(errors="replace").splitlines()]
        else:
            record = (dist.dist_info / "RECORD").read_text(errors="replace")
            names = [line.split(",", 1)[0].split("/", 1)[0] for line in record.splitlines()]
            names = [n[:-3] if n.endswith(".py") else n for n in names]
    except OSError:
        return []
    return [
        n
        for n in dict.fromkeys(names)
        if n.isidentifier()
        and not n.startswith("_")
        and ((site / n / "__init__.py").is_file() or (site / f"{n}.py").is_file())
    ]


def _drop_unused_variants(results: list[StepResult], site: Path) -> list[StepResult]:
    """A per-CUDA-major build (cuda-core cu13/ beside cu12/) that fails while its sibling
    loads is the variant the package does not pick: its error is no evidence."""

    def key(r: StepResult) -> tuple[str, bool]:
        path = Path(r.step.path)
        return variant_key(path, site), variant_key(path, site) != _plain(path, site)

    loaded = {key(r)[0] for r in results if r.step.path and r.outcome == "ok" and key(r)[1]}
    return [
        r
        for r in results
        if not (r.step.path and r.outcome == "error" and key(r)[1] and key(r)[0] in loaded)
    ]


def apply_loads(
    verdicts: dict[str, PackageVerdict],
    mine: dict[str, list[Step]],
    results: list[StepResult],
    site: Path | None = None,
) -> None:
    if site is not None:
        results = _drop_unused_variants(results, site)
    by_step = {r.step: r for r in results}
    for label, steps in mine.items():
        v = verdicts.get(label)
        if v is None:
            continue
        v.loads = [by_step[s] for s in steps if s in by_step]
        objects = [r for r in v.loads if r.step.kind != "import"]
        imports = [r for r in v.loads if r.step.kind == "import"]
        v.undeclared_failed = [
            name
            for name in v.undeclared
            if any(f"No module named '{name}'" in r.error for r in imports if r.outcome == "error")
        ]
        abi_failures = [
            r for r in objects if r.outcome == "error" and any(k in r.error for k in _ABI_ERROR)
        ]
        if v.candidates:
            v.confirmed = bool(abi_failures) or not objects
        elif v.optional_sonames:
            names = {m.soname for m in v.optional_sonames}
            v.confirmed = (
                any(r.outcome == "error" and any(n in r.error for n in names) for r in imports)
                or None
            )
        elif any(
            r.outcome == "error" and any(k in r.error for k in _LOAD_ONLY_ERROR) for r in objects
        ):
            v.confirmed = True  # the load found what the symbol check could not
