"""Lint the product's own text: no tracker references, no dead repository paths.

Product code (stackgate/, builder/, validators/, fleet/ Python) must say the rule and its reason,
not "issue N" (a tracker a reader of the code cannot open); the when and which machine go to
commit messages and benchmarks/<topic>/README.md. An upstream tracker stays when it is named
(`encode/httpcore#1110`, `uv #16802`): a reader can open that one.

Every repository path the product's text names must exist, so a pointer never goes dead:
- in comments, docstrings and other strings (help, error hints): a path under one of the
  repository's own top folders (benchmarks/, docs/, tests/, stacks/, images/, .ci/), and any
  `.md` path (a write-up is always ours: `results/x.md` alone names no file a reader can find);
- in comments and docstrings only: a module path (`records/clock.py`, `fleet/slurm/pin.c`),
  found from the repository root or from one of the naming file's parent folders. A string may
  name a module on purpose as data (a header an older generated file carries).
A placeholder ends what is checked: `stacks/locks/<stack>/uv.lock` and `stacks/locks/STACK`
check `stacks/locks`.

Usage: python .ci/product_text.py [ROOT]; exit 1 with one line per finding, 0 when clean.
"""

from __future__ import annotations

import io
import re
import sys
import tokenize
from pathlib import Path

PRODUCT = ("stackgate", "builder", "validators", "fleet")
# "issue 12", "issues #3", "wave 4", "stop 44", and an unnamed "(#34)" / ", #34" / "see #34"
TRACKER = re.compile(r"\b[Ii]ssues? #?\d+\b|\bwave \d+\b|\bstop \d+\b|(?:[(\[]|[,;] |\bsee )#\d+\b")
ROOTED = ("benchmarks", "docs", "tests", "stacks", "images", ".ci")
_SEGMENT = r"[\w.-]*[\w-]"
# a pointer into one of the repository's own top folders, or a write-up (.md) anywhere
POINTER = re.compile(
    r"(?<![\w./<>-])((?:" + "|".join(re.escape(r) for r in ROOTED) + r")(?:/" + _SEGMENT + r")+"
    r"|[\w.-]+(?:/[\w.-]+)*/[\w.-]+\.md)\b"
)
# a module path of ours: folders of lower-case names, a .py or .c file
MODULE = re.compile(r"(?<![\w./<>-])([a-z_][a-z0-9_]*(?:/[a-z0-9_]+)+\.(?:py|c))\b")
PLACEHOLDER = re.compile(r"[<>{}*]")
CAPS = re.compile(r"[A-Z][A-Z0-9_]*")  # STACK, NAME: a placeholder segment


def _bases(root: Path, source: Path) -> list[Path]:
    return [root, *(folder for folder in source.parents if root in folder.parents)]


def _checked(named: str) -> str:
    """`named` without trailing placeholder segments (`stacks/locks/STACK` -> `stacks/locks`)."""
    parts = named.rstrip(".").split("/")
    while len(parts) > 1 and CAPS.fullmatch(parts[-1]):
        parts.pop()
    return "/".join(parts)


def _dead(root: Path, source: Path, named: str) -> bool:
    """True when `named` is ours and exists nowhere: under the root, or (a module path or a
    write-up) beside the naming file. A module path whose first folder is none of ours is
    another package's file (torch/__init__.py), not a pointer into ours."""
    bases = _bases(root, source)
    first = named.split("/", 1)[0]
    ours = first in ROOTED or named.endswith(".md") or any((b / first).is_dir() for b in bases)
    return ours and not any((b / named).exists() for b in bases)


def text_lines(text: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(prose, strings) of a module, each as (line number, line): prose = its comments and
    docstrings; strings = its other string literals (help, messages, data)."""
    prose: list[tuple[int, str]] = []
    strings: list[tuple[int, str]] = []
    previous = tokenize.NEWLINE
    middle = getattr(tokenize, "FSTRING_MIDDLE", None)  # Python >= 3.12 splits f-strings
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT or (
            tok.type == tokenize.STRING
            and previous in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.NL)
        ):
            into = prose
        elif tok.type == tokenize.STRING or (middle is not None and tok.type == middle):
            into = strings
        else:
            into = None
        if into is not None:
            lines = tok.string.splitlines()
            into += [(tok.start[0] + i, line) for i, line in enumerate(lines)]
        if tok.type not in (tokenize.COMMENT, tokenize.NL):
            previous = tok.type
    return prose, strings


def prose(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the comments and docstrings of a module."""
    return text_lines(text)[0]


def _named(line: str, patterns: tuple[re.Pattern[str], ...]) -> list[str]:
    """The repository paths `line` names, each cut where a placeholder starts: `x/<y>/z` and
    `x/STACK` name `x`, `x/y{z}.toml` names `x`."""
    out: list[str] = []
    for pattern in patterns:
        for match in pattern.finditer(line):
            named = _checked(match.group(1))
            if PLACEHOLDER.match(line[match.end() : match.end() + 1]):
                named = named.rpartition("/")[0]  # its last segment is only part of a name
            if "/" in named:
                out.append(named)
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
            prose_lines, string_lines = text_lines(text)
            named = [(n, p) for n, line in prose_lines for p in _named(line, (POINTER, MODULE))]
            named += [(n, p) for n, line in string_lines for p in _named(line, (POINTER,))]
            for number, pointer in sorted(set(named)):
                if _dead(root, path, pointer):
                    out.append(f"{rel}:{number}: names {pointer}, which does not exist")
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
