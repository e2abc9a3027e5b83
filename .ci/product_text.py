"""Lint the product's own text: no tracker references, no dead repository paths.

Product code (stackgate/, builder/, validators/, fleet/ Python) must say the rule and its reason,
not "issue N" (a tracker a reader of the code cannot open); the when and which machine go to
commit messages and benchmarks/<topic>/README.md. Every repository path the product's text names
(benchmarks/..., docs/..., stacks/..., a module path) must exist, so a pointer never goes dead.

Usage: python .ci/product_text.py [ROOT]; exit 1 with one line per finding, 0 when clean.
"""

from __future__ import annotations

import io
import re
import sys
import tokenize
from pathlib import Path

PRODUCT = ("stackgate", "builder", "validators", "fleet")
TRACKER = re.compile(r"\b[Ii]ssues? #?\d+\b|\bwave \d+\b")
# a path is checked when it is unambiguous: under benchmarks/ or docs/, or a .py module path
# (found from the repository root or from one of the naming file's parent folders)
PATH = re.compile(r"(?<![\w./<>-])((?:benchmarks|docs)/[\w./-]*[\w-]|[a-z_]+(?:/[a-z_]+)+\.py)\b")
PLACEHOLDER = re.compile(r"[<>{}*]")


def _bases(root: Path, source: Path) -> list[Path]:
    return [root, *(folder for folder in source.parents if root in folder.parents)]


def _dead(root: Path, source: Path, named: str) -> bool:
    """True when `named` is ours (its first folder is one of ours) and exists nowhere."""
    bases = _bases(root, source)
    first = named.split("/", 1)[0]
    if first not in ("benchmarks", "docs") and not any((b / first).is_dir() for b in bases):
        return False  # another package's file (torch/__init__.py), not a pointer into ours
    return not any((b / named).exists() for b in bases)


def prose(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the comments and docstrings of a module: its prose, not its data
    (a string literal may name a path on purpose, e.g. a header older files carry)."""
    out: list[tuple[int, str]] = []
    previous = tokenize.NEWLINE
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT or (
            tok.type == tokenize.STRING
            and previous in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.NL)
        ):
            lines = tok.string.splitlines()
            out += [(tok.start[0] + i, line) for i, line in enumerate(lines)]
        if tok.type not in (tokenize.COMMENT, tokenize.NL):
            previous = tok.type
    return out


def findings(root: Path) -> list[str]:
    out: list[str] = []
    for top in PRODUCT:
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root)
            text = path.read_text(encoding="utf-8")
            for number, line in enumerate(text.splitlines(), 1):
                if TRACKER.search(line):
                    out.append(f"{rel}:{number}: tracker reference: {line.strip()[:100]}")
            for number, line in prose(text):
                for match in PATH.finditer(line):
                    named = match.group(1).rstrip(".")
                    if PLACEHOLDER.search(line[match.end() : match.end() + 1]):
                        continue
                    if _dead(root, path, named):
                        out.append(f"{rel}:{number}: names {named}, which does not exist")
    return out


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else Path(__file__).resolve().parent.parent
    found = findings(root)
    for line in found:
        print(line)
    print(f"{'FAILED' if found else 'OK'} product text: {len(found)} finding(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
