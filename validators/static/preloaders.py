"""What a package's import puts into the process before other packages' extensions load.

ld.so matches a DT_NEEDED soname against already loaded objects (RTLD_LOCAL ones too) before it
searches any path, so an extension with no RUNPATH to nvidia/*/lib loads where an earlier import
really loaded the library: `import torch` loads the DT_NEEDED closure of libtorch_global_deps.so
and torch/_C plus what `_load_global_deps` preloads, not what it loads lazily (libcusolver.so.11
through libtorch_cuda_linalg.so). Both parts are read, never assumed: the closure from the ELF
facts of the env's files (or the locked wheels' members), the preload list from that torch
version's torch/__init__.py (its `_preload_cuda_deps` calls, the fallback ones only when the
global deps library cannot load by its own RPATH, the others under their `"<path>" not in
<maps>` guard).
"""

from __future__ import annotations

import ast
import fnmatch
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from validators.elf.elf_symbols import ElfObject, ElfReadError
from validators.static.loader import HOST_PROVIDED, Resolver, own_rpath

PRELOAD_PREFIX = "_preload_cuda_"  # _preload_cuda_deps (<= 2.9), _preload_cuda_lib (2.10)
GLOBAL_DEPS_FUNCTION = "_load_global_deps"
GLOBAL_DEPS = "libtorch_global_deps.so"
# the sources a preloader's facts are read from (site-packages relative): the resolution memo
# keys on them, the pre-install check reads them from the wheel
PRELOADER_SOURCES = ("torch/__init__.py",)
MAX_SOURCE_BYTES = 4 << 20


def disk_text(path: Path) -> str | None:
    """An installed source file's text (None when absent or unreadable)."""
    try:
        if path.stat().st_size > MAX_SOURCE_BYTES:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


@dataclass(frozen=True)
class SourcePreload:
    """One library torch/__init__.py preloads by (folder, file-name glob)."""

    folder: str  # nvidia/<folder>/lib (else <folder>/lib) under site-packages
    pattern: str  # glob of the file name
    fallback: bool  # only when the global deps library failed to load
    guard: str | None = None  # loaded only when a loaded file's path contains this
    required: bool = True  # a miss raises, which ends the preloads after it


def _str(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _pairs(value: ast.expr) -> list[tuple[str, str]] | None:
    """The (folder, pattern) pairs of a dict literal or a list/tuple of 2-string tuples."""
    if isinstance(value, ast.Dict):
        return [
            (k, v)
            for key, val in zip(value.keys, value.values, strict=True)
            if key is not None and (k := _str(key)) is not None and (v := _str(val)) is not None
        ]
    if isinstance(value, ast.List | ast.Tuple):
        out = []
        for item in value.elts:
            if not (isinstance(item, ast.Tuple) and len(item.elts) == 2):
                return None
            k, v = _str(item.elts[0]), _str(item.elts[1])
            if k is None or v is None:
                return None
            out.append((k, v))
        return out
    return None


def _pair_literals(func: ast.FunctionDef) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {}
    for node in ast.walk(func):
        target: ast.expr | None = None
        value: ast.expr | None = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        if isinstance(target, ast.Name) and value is not None:
            pairs = _pairs(value)
            if pairs is not None:
                out[target.id] = pairs
    return out


def _guard(body: list[ast.stmt]) -> str | None:
    """`if "<loaded file>" not in _maps: return` in a block: the preloads after it run only
    when a loaded file's path contains that text."""
    for stmt in body:
        for node in ast.walk(stmt):
            if (
                isinstance(node, ast.If)
                and isinstance(node.test, ast.Compare)
                and len(node.test.ops) == 1
                and isinstance(node.test.ops[0], ast.NotIn)
                and any(isinstance(s, ast.Return) for s in node.body)
            ):
                text = _str(node.test.left)
                if text is not None and ("/" in text or ".so" in text):
                    return text
    return None


def _call_name(node: ast.AST) -> str | None:
    if (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
    ):
        return node.value.func.id
    return None


def _one_lib_call(node: ast.AST) -> tuple[str, str, bool] | None:
    """`_preload_cuda_...("folder", "pattern"[, required=False])`: one library's preload."""
    name = _call_name(node)
    if name is None or not name.startswith(PRELOAD_PREFIX):
        return None
    assert isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
    args = [_str(a) for a in node.value.args[:2]]
    if len(args) != 2 or args[0] is None or args[1] is None:
        return None
    required = True
    for kw in node.value.keywords:
        if kw.arg == "required" and isinstance(kw.value, ast.Constant):
            required = bool(kw.value.value)
    if len(node.value.args) > 2 and isinstance(node.value.args[2], ast.Constant):
        required = bool(node.value.args[2].value)
    return args[0], args[1], required


def _calls_one_lib(body: list[ast.stmt]) -> bool:
    return any(
        _call_name(n) is not None and (_call_name(n) or "").startswith(PRELOAD_PREFIX)
        for stmt in body
        for n in ast.walk(stmt)
    )


def torch_source_preloads(text: str) -> list[SourcePreload]:
    """The preloads torch/__init__.py makes in `_load_global_deps`, in order, following its
    calls into the module's other functions (empty when it has none, or it does not parse).

    torch <= 2.9 calls `_preload_cuda_deps(folder, pattern)` per library; 2.10 calls
    `_preload_cuda_deps()`, which walks a list of pairs through `_preload_cuda_lib`. Both
    shapes are read, as is a dict of pairs walked with `.items()`."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    top = functions.get(GLOBAL_DEPS_FUNCTION)
    if top is None:
        return []
    out: list[SourcePreload] = []

    def visit_function(
        func: ast.FunctionDef, fallback: bool, guard: str | None, seen: set[str]
    ) -> None:
        literals = _pair_literals(func)
        for stmt in func.body:
            visit(stmt, fallback, guard, literals, seen | {func.name})

    def visit(
        node: ast.AST,
        fallback: bool,
        guard: str | None,
        literals: dict[str, list[tuple[str, str]]],
        seen: set[str],
    ) -> None:
        if isinstance(node, ast.Try):
            guarded = _guard(node.body) or guard
            for child in node.body:
                visit(child, fallback, guarded, literals, seen)
            for handler in node.handlers:
                for child in handler.body:
                    visit(child, True, None, literals, seen)
            for child in [*node.orelse, *node.finalbody]:
                visit(child, fallback, guard, literals, seen)
            return
        if isinstance(node, ast.For) and _calls_one_lib(node.body):
            walked = node.iter
            if (
                isinstance(walked, ast.Call)
                and isinstance(walked.func, ast.Attribute)
                and walked.func.attr == "items"
            ):
                walked = walked.func.value
            if isinstance(walked, ast.Name) and walked.id in literals:
                out.extend(SourcePreload(k, v, fallback, guard) for k, v in literals[walked.id])
                return
        one = _one_lib_call(node)
        if one is not None:
            out.append(SourcePreload(one[0], one[1], fallback, guard, one[2]))
            return
        name = _call_name(node)
        if name is not None and name in functions and name not in seen:
            visit_function(functions[name], fallback, guard, seen)
            return
        for sub in ast.iter_child_nodes(node):
            visit(sub, fallback, guard, literals, seen)

    visit_function(top, False, None, set())
    return out


@dataclass
class ImportClosure:
    """The libraries one package's import leaves in the process, by soname and file name."""

    package: str
    loaded: dict[str, Path] = field(default_factory=dict)
    preloaded: list[Path] = field(default_factory=list)  # files its source preloads
    fallback_used: bool = False
    unresolved: list[str] = field(default_factory=list)  # sonames its own loads could not find

    def describe(self) -> str:
        files = len(set(self.loaded.values()))
        pre = f", {len(self.preloaded)} of them preloaded by its source" if self.preloaded else ""
        name = self.package.split(" ")[0]
        return f"`import {name}` ({self.package}) loads {files} libraries at import{pre}"


def _load(resolver: Resolver, closure: ImportClosure, path: Path) -> list[str]:
    """Load `path` the way dlopen does into a process holding `closure.loaded`: breadth-first
    over DT_NEEDED, a soname already loaded matched first. Returns the sonames not found."""
    try:
        root = resolver.load(path)
    except ElfReadError:
        return [path.name]
    missing: list[str] = []
    loaded = closure.loaded
    _add(loaded, root)
    queue: list[tuple[ElfObject, tuple[str, ...]]] = [(root, ())]
    while queue:
        current, inherited = queue.pop(0)
        passed = () if current.runpath else own_rpath(current) + inherited
        for soname in current.needed:
            if soname in loaded:
                continue
            found = resolver.find_in(soname, current, inherited, False)
            if found is None:
                if soname not in HOST_PROVIDED:
                    missing.append(soname)
                continue
            _add(loaded, found, soname)
            queue.append((found, passed))
    return missing


def _add(loaded: dict[str, Path], obj: ElfObject, asked: str | None = None) -> None:
    for name in (obj.soname, obj.path.name, asked):
        if name:
            loaded.setdefault(name, obj.path)


def _matches(
    listdir: Callable[[str], frozenset[str]], site: Path, pre: SourcePreload
) -> Iterator[Path]:
    for folder in (site / "nvidia" / pre.folder / "lib", site / pre.folder / "lib"):
        names = sorted(n for n in listdir(str(folder)) if fnmatch.fnmatch(n, pre.pattern))
        if names:
            yield folder / names[0]
            return


def torch_import_closure(resolver: Resolver, site: Path, init_text: str | None) -> ImportClosure:
    """What `import torch` loads (Linux): libtorch_global_deps.so (after the fallback
    preloads when it cannot load by itself), the guarded preloads, then torch/_C."""
    closure = ImportClosure("torch")
    listdir = resolver.source.listdir
    preloads = torch_source_preloads(init_text) if init_text else []
    lib = site / "torch" / "lib"
    if GLOBAL_DEPS in listdir(str(lib)):
        trial = ImportClosure("torch", dict(closure.loaded))
        if _load(resolver, trial, lib / GLOBAL_DEPS):
            fallback = [p for p in preloads if p.fallback]
            closure.fallback_used = bool(fallback)
            for pre in fallback:
                for path in _matches(listdir, site, pre):
                    closure.preloaded.append(path)
                    _load(resolver, closure, path)
            closure.unresolved += _load(resolver, closure, lib / GLOBAL_DEPS)
        else:
            closure.loaded = trial.loaded
    for pre in preloads:
        if pre.fallback:
            continue
        if pre.guard is not None and not any(pre.guard in str(p) for p in closure.loaded.values()):
            continue
        found = list(_matches(listdir, site, pre))
        if not found and pre.required:
            break  # the preload raises, and the `except Exception: pass` around it skips the rest
        for path in found:
            closure.preloaded.append(path)
            _load(resolver, closure, path)
    torch_dir = site / "torch"
    for name in sorted(listdir(str(torch_dir))):
        if name.startswith("_C.") and name.endswith(".so"):
            closure.unresolved += _load(resolver, closure, torch_dir / name)
    return closure
