"""Modules a package imports at import time without declaring them.

bitsandbytes 0.47.0 does `from packaging import version` while its METADATA requires only torch
and numpy: without `packaging`, `import bitsandbytes` fails though every symbol resolves. Found
from the files alone:
- the modules `import PKG` runs: its `__init__.py` and, transitively, its own modules imported
  at column 0 (an import under `try:`, `if TYPE_CHECKING:` or in a function is indented and
  skipped);
- each such import whose top-level name is not the package's own, not the standard library and
  not installed is a candidate, and a finding only when the confirming load's `import PKG` fails
  with "No module named '<name>'".
"""

from __future__ import annotations

import ast
import contextlib
import functools
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

_IMPORT = re.compile(r"^import[ \t]+([\w.]+(?:[ \t]*,[ \t]*[\w.]+)*)", re.MULTILINE)
_FROM = re.compile(r"^from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\(?[\w \t,.*]+)", re.MULTILINE)
MAX_MODULES = 2000  # import-time modules read per package (torch's are ~1,300)


def installed_top_levels(site: Path) -> set[str]:
    """Importable top-level names in site-packages: packages (and namespace folders), modules
    (`x.py`, `x.cpython-312-....so`), and the names dist-info top_level.txt files list."""
    names: set[str] = set()
    try:
        entries = list(site.iterdir())
    except OSError:
        return names
    for entry in entries:
        name = entry.name
        if name.endswith((".dist-info", ".egg-info")):
            top = entry / "top_level.txt"
            with contextlib.suppress(OSError):
                names.update(n.strip() for n in top.read_text(errors="replace").splitlines())
            continue
        if entry.is_dir():
            names.add(name)
        elif name.endswith(".py") or name.endswith(".so") or ".cpython-" in name:
            names.add(name.split(".", 1)[0])
    return {n for n in names if n.isidentifier()}


def _module_file(site: Path, dotted: str) -> Path | None:
    base = site.joinpath(*dotted.split("."))
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _package_of(site: Path, path: Path) -> str:
    rel = path.relative_to(site).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_time_imports(site: Path, top: str) -> dict[str, Path]:
    """Top-level names of modules outside `top` that `import top` imports unconditionally,
    each with the first file that does."""
    start = _module_file(site, top)
    if start is None:
        return {}
    outside: dict[str, Path] = {}
    seen: set[Path] = set()
    queue = [start]
    while queue and len(seen) < MAX_MODULES:
        path = queue.pop()
        if path in seen:
            continue
        seen.add(path)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        module = _package_of(site, path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets = _targets(text, package)
        for dotted in targets:
            first = dotted.split(".")[0]
            if not first:
                continue
            if first != top:
                outside.setdefault(first, path)
                continue
            found = _module_file(site, dotted)
            if found is not None and found not in seen:
                queue.append(found)
            parent = dotted.rpartition(".")[0]
            while parent:  # importing a.b.c runs a/__init__.py and a/b/__init__.py
                init = _module_file(site, parent)
                if init is not None and init not in seen:
                    queue.append(init)
                parent = parent.rpartition(".")[0]
    return outside


# The standard library's top-level names change with the version: this tool's interpreter
# (sys.stdlib_module_names) may not be the env's. Removed: PEP 632 (distutils, 3.12), the
# 3.12 removals (asynchat, asyncore, imp, smtpd), PEP 594 and lib2to3 (3.13). Added since 3.9.
_REMOVED_IN = {
    (3, 12): {"distutils", "asynchat", "asyncore", "imp", "smtpd"},
    (3, 13): {
        "aifc", "audioop", "cgi", "cgitb", "chunk", "crypt", "imghdr", "lib2to3", "mailcap",
        "msilib", "nis", "nntplib", "ossaudiodev", "pipes", "sndhdr", "spwd", "sunau",
        "telnetlib", "uu", "xdrlib",
    },
}  # fmt: skip
_ADDED_IN = {(3, 9): {"graphlib", "zoneinfo"}, (3, 11): {"tomllib"}, (3, 14): {"annotationlib", "compression"}}  # fmt: skip


def stdlib_names(python: tuple[int, int] | None) -> set[str]:
    """Top-level standard library modules of Python `python` (this interpreter's when None),
    plus __main__, which every process has."""
    names = set(sys.stdlib_module_names) | {"__main__"}
    if python is None:
        return names
    for version, removed in _REMOVED_IN.items():
        names -= removed if python >= version else set()
        names |= removed if python < version else set()
    for version, added in _ADDED_IN.items():
        names |= added if python >= version else set()
        names -= added if python < version else set()
    return names


def undeclared_imports(
    site: Path, tops: list[str], installed: set[str], python: tuple[int, int] | None = None
) -> dict[str, Path]:
    """Names `import TOP` needs (for each of the distribution's top-level packages) that are
    neither the standard library of the env's Python nor installed: {name: file that imports
    it}. distutils counts as installed where setuptools' _distutils_hack is (its .pth file
    serves `import distutils` on 3.12+)."""
    stdlib = stdlib_names(python)
    if "_distutils_hack" in installed:
        stdlib.add("distutils")
    out: dict[str, Path] = {}
    for top in tops:
        for name, where in import_time_imports(site, top).items():
            if name in stdlib or name in installed or name in tops or name == "__future__":
                continue
            if name not in out and _imports_at_module_level(where, name):
                out[name] = where
    return out


def _imports_at_module_level(path: Path, name: str) -> bool:
    """Does `path` import `name` in a statement of its module body (the column-0 text could be
    inside a docstring)? Parsed only for the rare candidate."""
    try:
        tree = ast.parse(path.read_bytes(), str(path))
    except (OSError, SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, ast.Import):
            if any(a.name.split(".")[0] == name for a in node.names):
                return True
        elif (
            isinstance(node, ast.ImportFrom)
            and not node.level
            and node.module
            and node.module.split(".")[0] == name
        ):
            return True
    return False


@dataclass(frozen=True)
class SourceTree:
    """A distribution's files as the import-time walk sees them: names relative to
    site-packages ("/"-separated) and a reader of one file's text (the installed file, or the
    wheel member read by byte ranges before install)."""

    names: frozenset[str]
    text_of: Callable[[str], str | None]

    def tops(self) -> list[str]:
        """Its importable top-level packages (a folder with __init__.py, not private)."""
        return sorted(
            {
                n.split("/")[0]
                for n in self.names
                if n.count("/") == 1
                and n.endswith("/__init__.py")
                and n.split("/")[0].isidentifier()
                and not n.startswith("_")
            }
        )


def import_time_modules(
    tops: list[str], text_of: Callable[[str], str | None], names: frozenset[str]
) -> set[str]:
    """Dotted names of the modules `import TOP` runs, for each of `tops` (a distribution's
    top-level packages): its Python modules, followed through their unconditional (column-0)
    imports of modules of the same distribution, and the extension modules those imports name.
    `names`: the distribution's files (site-packages relative, "/"-separated); `text_of`:
    a file's text by that name. An extension module's own imports (a Cython `cimport` imports
    its module at init) are not seen: what this reaches is a lower bound."""
    mine = set(tops)
    reached: set[str] = set()
    queue = list(tops)
    while queue and len(reached) < MAX_MODULES:
        dotted = queue.pop()
        if dotted in reached:
            continue
        found = _file_of(dotted, names)
        if found is None:
            continue
        reached.add(dotted)
        parent = dotted.rpartition(".")[0]
        if parent and parent not in reached:
            queue.append(parent)
        if not found.endswith(".py"):
            continue  # an extension module
        text = text_of(found)
        if text is None:
            continue
        package = dotted if found.endswith("/__init__.py") else parent
        for target in _targets(text, package):
            if target.split(".")[0] in mine and target not in reached:
                queue.append(target)
    return reached


def _file_of(dotted: str, names: frozenset[str]) -> str | None:
    base = dotted.replace(".", "/")
    for candidate in (f"{base}/__init__.py", f"{base}.py"):
        if candidate in names:
            return candidate
    return _extensions(names).get(base)


@functools.lru_cache(maxsize=16)
def _extensions(names: frozenset[str]) -> dict[str, str]:
    """ "a/b" -> the first (sorted) extension file a/b.<tag>.so: one pass per file set, not
    one sort per lookup (torch's walk looks up ~1,500 names among ~20,000 files)."""
    out: dict[str, str] = {}
    for n in sorted(names):
        if n.endswith(".so"):
            folder, _, file = n.rpartition("/")
            stem = file.split(".", 1)[0]
            if "." in file:
                out.setdefault(f"{folder}/{stem}" if folder else stem, n)
    return out


def _targets(text: str, package: str) -> list[str]:
    """The dotted names a module's column-0 imports may load (`from a import b`: a and a.b)."""
    targets: list[str] = []
    for match in _IMPORT.finditer(text):
        targets += [m.strip().split(" ")[0] for m in match.group(1).split(",")]
    for match in _FROM.finditer(text):
        dots, name, what = match.group(1), match.group(2), match.group(3)
        if dots:
            base = package.split(".")
            base = base[: len(base) - (len(dots) - 1)] if len(dots) > 1 else base
            dotted = ".".join([*base, name] if name else base)
        else:
            dotted = name
        subs = [s.strip() for s in what.strip("()").split(",") if s.strip()]
        targets += [dotted] + [f"{dotted}.{s.split()[0]}" for s in subs if s != "*"]
    return [t for t in targets if t]
