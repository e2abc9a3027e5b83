"""The house review's counts for one git revision: product lines, modules, long functions,
tracker references, and import cycles between packages.

    python benchmarks/house_walk/house_counts.py [REV ...]   (default: HEAD)

Prints one JSON object per revision, then a table. Product = stackgate/, builder/, validators/
(.py files; a line counts when it is not blank). A function is long at >= 80 lines (its whole
def, decorators excluded). A package cycle is a pair of packages (a module's package = the
folder holding it) each importing a module of the other.
"""

from __future__ import annotations

import ast
import io
import json
import re
import statistics
import subprocess
import sys
import tarfile
from pathlib import PurePosixPath

PRODUCT = ("stackgate", "builder", "validators")
LONG = 80
TRACKER = re.compile(r"\b[Ii]ssues? #?\d+\b")


def files_at(rev: str) -> dict[str, str]:
    """The product's .py files at `rev`, read from `git archive` (the working tree untouched)."""
    blob = subprocess.run(
        ["git", "archive", "--format=tar", rev, *PRODUCT], capture_output=True, check=True
    ).stdout
    out: dict[str, str] = {}
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.endswith(".py"):
                handle = tar.extractfile(member)
                if handle is not None:
                    out[member.name] = handle.read().decode("utf-8", "replace")
    return out


def _package(path: str) -> str:
    return ".".join(PurePosixPath(path).parent.parts)


def _imported(tree: ast.Module, path: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = PurePosixPath(path).parent.parts
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                names.add(".".join([*base, node.module] if node.module else base))
            elif node.module:
                names.add(node.module)
    return {n for n in names if n.split(".")[0] in PRODUCT}


def counts(rev: str) -> dict[str, object]:
    files = files_at(rev)
    modules = {p.removesuffix(".py").replace("/", "."): p for p in files}
    packages = {_package(p) for p in files}
    lines: list[int] = []
    long_functions: list[str] = []
    trackers = 0
    edges: set[tuple[str, str]] = set()
    for path, text in sorted(files.items()):
        lines.append(sum(1 for line in text.splitlines() if line.strip()))
        trackers += len(TRACKER.findall(text))
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno:
                length = node.end_lineno - node.lineno + 1
                if length >= LONG:
                    long_functions.append(f"{path}:{node.lineno} {node.name} ({length})")
        here = _package(path)
        for name in _imported(tree, path):
            target = name if name in packages else None
            if target is None and name in modules:
                target = _package(modules[name])
            if target is None and name.rpartition(".")[0] in modules:
                target = _package(modules[name.rpartition(".")[0]])
            if target and target != here:
                edges.add((here, target))
    cycles = sorted(f"{a} <-> {b}" for a, b in edges if (b, a) in edges and a < b)
    return {
        "rev": subprocess.run(
            ["git", "rev-parse", "--short", rev], capture_output=True, text=True, check=True
        ).stdout.strip(),
        "product_lines": sum(lines),
        "modules": len(lines),
        "median_module_lines": statistics.median(lines),
        "functions_ge_80_lines": len(long_functions),
        "long_functions": long_functions,
        "tracker_references": trackers,
        "package_cycles": cycles,
    }


def main(argv: list[str]) -> int:
    results = [counts(rev) for rev in (argv or ["HEAD"])]
    for r in results:
        print(json.dumps(r))
    print("| rev | product lines | modules | median | functions >= 80 | tracker refs | cycles |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['rev']} | {r['product_lines']} | {r['modules']} | {r['median_module_lines']} "
            f"| {r['functions_ge_80_lines']} | {r['tracker_references']} "
            f"| {len(r['package_cycles'])} |"  # type: ignore[arg-type]
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
