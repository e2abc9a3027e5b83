"""What a package's own Python code loads before its extension modules, read from its source.

ld.so finds a DT_NEEDED library no RUNPATH reaches when the process loaded it first, which a
package's Python code may do itself; such loads are read here, never assumed from file places:
- a library named by a literal: `ctypes.CDLL("libfoo.so")`, torchaudio's `_load_lib(...)`, jax's
  plugin `_load("cublas", [...])`, onnxruntime's `("nvidia", "cublas", "lib", ...)` tuples;
- when it runs: at import (reached from top-level code through the module's own functions), or
  only when an entry function is called (onnxruntime's `preload_dlls()`), named by it;
- a load whose argument is computed (cupy's `ctypes.CDLL(libpath)`): unknown to a static reading,
  and the verdict says so.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from stackgate.installed import Distribution
from validators.static.imports import SourceTree, import_time_modules

# calls that load a shared library into the process
LOAD_CALLS = frozenset(
    {"CDLL", "PyDLL", "LoadLibrary", "load_library", "dlopen", "load_nvidia_dynamic_lib"}
)
MAX_MEMBERS = 800  # Python files read per package (torch's own loads are read by preloaders.py)
MAX_MEMBER_BYTES = 1 << 20
# a literal that can name a library: libfoo, libfoo.so, libfoo.so.12, libcublas.so.*[0-9]
_LIBRARY = re.compile(r"^(?:.*/)?lib[\w+.*-]*(?:\.so[\w.*\[\]-]*)?$")


@dataclass(frozen=True)
class LoadSite:
    """Where a package's source names a library (or loads a computed path)."""

    member: str  # site-packages relative file
    line: int
    text: str  # the literal, or the load call's source for a computed one
    entry: str | None  # None: runs at import; else the function whose call runs it
    # the other strings of the call or tuple the literal is in: jax's _load("cublas", [...])
    # and onnxruntime's ("nvidia", "cublas", "lib", ...) name the folder they load from
    context: tuple[str, ...] = ()

    def where(self) -> str:
        return f"{self.member}:{self.line}"

    def names_folder(self, installed: Path) -> bool:
        """Does the site name the folder of `installed` (nvidia/cublas/lib/libcublas.so.12:
        "cublas")? A package loading "libcudart.so.12" from a folder it computes (sgl-kernel
        searches CUDA_HOME) does not load the env's nvidia/cuda_runtime/lib copy."""
        folder = installed.parent.parent.name if installed.parent.name == "lib" else ""
        if not folder:
            return False
        return folder in self.context or f"{folder}/lib/" in self.text

    def when(self) -> str:
        return "at import" if self.entry is None else f"only when `{self.entry}()` is called"


@dataclass
class PackageLoads:
    """The libraries a package's source names, and its load calls with computed arguments."""

    label: str
    named: list[LoadSite] = field(default_factory=list)
    computed: list[LoadSite] = field(default_factory=list)
    members_read: int = 0

    def site_for(self, file_name: str) -> LoadSite | None:
        """The site naming a library file (its name, its name before `.so`, a glob matching
        it, or a path ending in it), an import-time one first."""
        stem = file_name.split(".so", 1)[0]
        hits = [s for s in self.named if _names(s.text, file_name, stem)]
        hits.sort(key=lambda s: (s.entry is not None, s.member, s.line))
        return hits[0] if hits else None


def _names(literal: str, file_name: str, stem: str) -> bool:
    tail = literal.rsplit("/", 1)[-1]
    if tail in (file_name, stem):
        return True
    return any(c in tail for c in "*?[") and fnmatch.fnmatch(file_name, tail)


def _call_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


class _Module:
    """One source file: its functions, the calls between them, and what each names."""

    def __init__(self, member: str, tree: ast.Module, text: str) -> None:
        self.member = member
        self.text = text
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.functions.setdefault(node.name, node)
        self.tree = tree

    def _callees(self, node: ast.AST) -> set[str]:
        return {
            name
            for sub in ast.walk(node)
            if isinstance(sub, ast.Call)
            and (name := _call_name(sub)) is not None
            and name in self.functions
        }

    def top_calls(self) -> set[str]:
        """Names the module's top-level code calls (`f()`, `mod.f()`): what runs at import."""
        top = [s for s in self.tree.body if not isinstance(s, ast.FunctionDef | ast.ClassDef)]
        return {
            name
            for stmt in top
            for sub in ast.walk(stmt)
            if isinstance(sub, ast.Call) and (name := _call_name(sub)) is not None
        }

    def entries(self, at_import: set[str]) -> dict[str, str | None]:
        """Per function: None when top-level code reaches it (runs at import; `at_import`:
        the names any module of the package calls at its top level, `mod.f()` included),
        else the name of a function that reaches it and that nothing in the module calls."""
        out: dict[str, str | None] = {}

        def reach(queue: list[str], entry: str | None) -> None:
            while queue:
                name = queue.pop()
                if name not in out:
                    out[name] = entry
                    queue += self._callees(self.functions[name])

        reach([name for name in self.functions if name in at_import], None)
        called = {c for f in self.functions.values() for c in self._callees(f)}
        for entry in sorted(self.functions):
            if entry not in called and entry not in out:
                reach([entry], entry)
        for name in self.functions:  # mutually recursive, never entered from outside
            out.setdefault(name, name)
        return out


def _enclosing(tree: ast.Module) -> dict[int, str]:
    """id(node) -> the innermost function it lies in."""
    out: dict[int, str] = {}

    def visit(node: ast.AST, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = (
                child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else None
            )
            here = inner or function
            if here is not None:
                out[id(child)] = here
            visit(child, here)

    visit(tree, None)
    return out


def parse_module(member: str, text: str) -> _Module | None:
    try:
        return _Module(member, ast.parse(text), text)
    except (SyntaxError, ValueError):
        return None


def read_module(
    module: _Module, at_import: set[str], loaders: set[str], loads: PackageLoads
) -> None:
    """Add one source file's library literals and computed load calls to `loads`. A literal
    counts only where it can reach a load: inside a loader (a function that loads, or calls
    one that does) or a function a loader calls (onnxruntime's path list), or among the
    arguments of a call to a loader (torchaudio's `_load_lib("libtorchaudio")`); `loaders`:
    the package's loader names, every module's."""
    tree, text, member = module.tree, module.text, module.member
    entries = module.entries(at_import)
    inside = _enclosing(tree)
    parents = {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    serving = set(loaders)
    queue = [f for f in module.functions if f in loaders]
    while queue:  # what a loader of this module calls serves it
        for callee in module._callees(module.functions[queue.pop()]):
            if callee not in serving:
                serving.add(callee)
                queue.append(callee)
    in_loader_call: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _call_name(node) in (loaders | LOAD_CALLS):
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                in_loader_call.update(id(sub) for sub in ast.walk(arg))

    def entry_of(node: ast.AST) -> str | None:
        function = inside.get(id(node))
        if function is None:
            return None
        # a class body's code runs at import; its methods, like functions, when called
        return entries.get(function, function)

    for node in ast.walk(tree):
        if isinstance(node, ast.Constant | ast.JoinedStr):
            value = _literal(node)
            if value is None or not (
                len(value) < 200 and _LIBRARY.match(value) and _specific(value.rsplit("/", 1)[-1])
            ):
                continue
            if id(node) in in_loader_call or inside.get(id(node)) in serving:
                around = _context(node, parents)
                loads.named.append(LoadSite(member, node.lineno, value, entry_of(node), around))
        elif isinstance(node, ast.Call) and _call_name(node) in LOAD_CALLS and node.args:
            first = node.args[0]
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                call = ast.get_source_segment(text, node) or _call_name(node) or ""
                loads.computed.append(LoadSite(member, node.lineno, call[:120], entry_of(node)))


def _context(node: ast.AST, parents: dict[int, ast.AST]) -> tuple[str, ...]:
    """The string constants of the nearest call or tuple around `node` (its siblings)."""
    here: ast.AST | None = parents.get(id(node))
    while here is not None and not isinstance(here, ast.Call | ast.Tuple):
        if isinstance(here, ast.stmt):
            return ()
        here = parents.get(id(here))
    if here is None:
        return ()
    inner = here.args if isinstance(here, ast.Call) else here.elts
    return tuple(
        sub.value
        for arg in inner
        for sub in ast.walk(arg)
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str)
    )


def _specific(name: str) -> bool:
    """A name or glob that can stand for one library: `lib` and `lib*` (f"lib{x}") cannot."""
    return len(name.split("*", 1)[0]) > len("lib")


def _literal(node: ast.Constant | ast.JoinedStr) -> str | None:
    """A string literal's text; an f-string's as a glob (f"libtorio_ffmpeg{v}" ->
    "libtorio_ffmpeg*": torchaudio 2.8 loads one of its FFmpeg builds by version)."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    parts = [
        v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "*"
        for v in node.values
    ]
    return "".join(parts)


def _parse(texts: dict[str, str]) -> list[_Module]:
    return [m for member, text in sorted(texts.items()) if (m := parse_module(member, text))]


def _loaders(modules: list[_Module]) -> set[str]:
    """Names of the package's functions that load a library or call (by name, across its
    modules) a function that does."""
    calls = {
        name: {
            c
            for sub in ast.walk(func)
            if isinstance(sub, ast.Call) and (c := _call_name(sub)) is not None
        }
        for m in modules
        for name, func in m.functions.items()
    }
    found = {name for name, called in calls.items() if called & LOAD_CALLS}
    grew = True
    while grew:
        more = {name for name, called in calls.items() if called & found} - found
        grew = bool(more)
        found |= more
    return found


def read_package_loads(label: str, tree: SourceTree, *, every: bool = False) -> PackageLoads:
    """The Python files `import` of the package runs (imports.py's import-time walk, from its
    top-level packages and those inside its namespace folders such as jax_plugins/xla_cuda12): what
    can load a library before its extension modules. `every`: all its Python files (tests aside),
    asked only for a library of the package's own folder the import-time files do not name
    (torchaudio's CTC decoder loads libctc_prefix_decoder.so later).
    """
    loads = PackageLoads(label)
    texts: dict[str, str] = {}
    for member in _all_members(tree) if every else _members(tree):
        text = tree.text_of(member)
        if text is not None and len(text) <= MAX_MEMBER_BYTES:
            texts[member] = text
    loads.members_read = len(texts)
    # parse only what can take part: files with a load call, then files naming a loader
    modules = _parse({m: t for m, t in texts.items() if any(c in t for c in LOAD_CALLS)})
    loaders = _loaders(modules)
    parsed = {m.member for m in modules}
    modules += _parse(
        {m: t for m, t in texts.items() if m not in parsed and any(name in t for name in loaders)}
    )
    at_import = {name for m in modules for name in m.top_calls()}
    loaders = _loaders(modules)
    for module in modules:
        read_module(module, at_import, loaders, loads)
    return loads


def _members(tree: SourceTree) -> list[str]:
    names = tree.names
    seeds = set(tree.tops())
    for n in names:  # a package inside a namespace folder (no __init__.py of its own)
        parts = n.split("/")
        if (
            len(parts) == 3
            and parts[2] == "__init__.py"
            and f"{parts[0]}/__init__.py" not in names
            and all(p.isidentifier() for p in parts[:2])
        ):
            seeds.add(f"{parts[0]}.{parts[1]}")
    reached = import_time_modules(sorted(seeds), tree.text_of, names)
    files = {f for dotted in reached if (f := _py_file(dotted, names)) is not None}
    return sorted(files)[:MAX_MEMBERS]


def _all_members(tree: SourceTree) -> list[str]:
    py = sorted(
        n
        for n in tree.names
        if n.endswith(".py")
        and ".dist-info/" not in n
        and not any(p in ("tests", "test", "testing") for p in n.split("/")[:-1])
    )
    return py[:MAX_MEMBERS]


def _py_file(dotted: str, names: Iterable[str]) -> str | None:
    base = dotted.replace(".", "/")
    for candidate in (f"{base}/__init__.py", f"{base}.py"):
        if candidate in names:
            return candidate
    return None


def record_tree(site: Path, dist: Distribution) -> SourceTree | None:
    """An installed distribution's files (its RECORD), each read from disk when asked."""
    try:
        record = (dist.dist_info / "RECORD").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    names = frozenset(
        row.split(",", 1)[0] for row in record.splitlines() if row and not row.startswith("..")
    )
    return SourceTree(names, lambda name: _disk_text(site / name))


def _disk_text(path: Path) -> str | None:
    try:
        if path.stat().st_size > MAX_MEMBER_BYTES:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
