"""The import plan of a checkout at package level (issue 28's "rooms / floors / arrows"):
rooms = packages of builder/ and validators/ (a module's room is the package holding it),
arrows = distinct room -> room imports among them (imports under `if TYPE_CHECKING:` left
out, as the review did), floors = rooms on the longest chain of arrows, circles = groups of
rooms that import each other.

Usage: python benchmarks/house_walk/rooms.py CHECKOUT [CHECKOUT ...]   (prints JSON per tree)
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

TOPS = ("builder", "validators")


def _room(module: str, is_package: bool) -> str:
    return module if is_package else module.rpartition(".")[0]


def _modules(root: Path) -> dict[str, tuple[Path, bool]]:
    out: dict[str, tuple[Path, bool]] = {}
    for top in TOPS:
        for path in (root / top).rglob("*.py"):
            rel = path.relative_to(root).with_suffix("")
            parts = list(rel.parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts = parts[:-1]
            out[".".join(parts)] = (path, is_package)
    return out


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(
    tree: ast.AST, module: str, is_package: bool, *, type_checking: bool = False
) -> set[str]:
    """The modules a module's import statements name; those under `if TYPE_CHECKING:` only
    with `type_checking`."""
    found: set[str] = set()
    skip: set[int] = set()
    for node in ast.walk(tree):
        if not type_checking and isinstance(node, ast.If) and _type_checking(node):
            skip.update(id(n) for child in node.body for n in ast.walk(child))
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = module if is_package else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    pkg = pkg.rpartition(".")[0]
                base = f"{pkg}.{base}" if base else pkg
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return found


def plan(root: Path) -> dict[str, object]:
    modules = _modules(root)
    rooms = {_room(m, p) for m, (_, p) in modules.items()}
    arrows: set[tuple[str, str]] = set()
    for name, (path, is_package) in modules.items():
        src = _room(name, is_package)
        for target in _imports(ast.parse(path.read_text(encoding="utf-8")), name, is_package):
            if target in modules:
                dst = _room(target, modules[target][1])
                if dst != src:
                    arrows.add((src, dst))
    graph = {r: sorted(d for s, d in arrows if s == r) for r in rooms}
    # circles: strongly connected groups (Tarjan), then floors on the condensed graph
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            groups.append(sorted(group))

    sys.setrecursionlimit(10_000)
    for r in sorted(rooms):
        if r not in index:
            visit(r)
    of = {r: i for i, g in enumerate(groups) for r in g}
    depth: dict[int, int] = {}

    def floors(g: int) -> int:
        if g not in depth:
            below = {of[d] for r in groups[g] for d in graph[r] if of[d] != g}
            depth[g] = 1 + max((floors(b) for b in below), default=0)
        return depth[g]

    return {
        "rooms": len(rooms),
        "arrows": len(arrows),
        "floors": max(floors(g) for g in range(len(groups))),
        "circles": [g for g in groups if len(g) > 1],
        "loose_modules": {top: _loose(modules, top) for top in TOPS},
    }


def _loose(modules: dict[str, tuple[Path, bool]], top: str) -> list[str]:
    """Modules right under `top` (not in a subpackage), __main__ left out."""
    return sorted(
        m
        for m, (_, is_package) in modules.items()
        if not is_package
        and m.count(".") == 1
        and m.startswith(f"{top}.")
        and not m.endswith("__main__")
    )


def main(argv: list[str]) -> int:
    out = {str(a): plan(Path(a)) for a in argv}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
