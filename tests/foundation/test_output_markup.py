"""No literal rich markup in what a command prints (issue 29 item 4).

Every console has markup off (stackgate/output.py): user, record and log text is printed as it
is. Styles come only from `styled()` (our template, escaped values) or a `Text` with a style.
A markup string handed straight to `print` or to a table cell is therefore printed as typed:
`builder verify` said `[bold green]OK[/] ...` and the fleet table `[bold red]FAIL[/]`. This
walks every call in the product's sources and names each string argument that carries markup
outside `styled()`; `test_tree_integrity` and the records CLI tests see the printed lines."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("stackgate", "builder", "validators")
MARKUP = re.compile(
    r"\[(?:bold|dim|italic|underline|red|green|yellow|blue|magenta|cyan)(?: [a-z]+)*\]|\[/\]"
)
# Calls that parse markup themselves: ours (styled), rich's (Text.from_markup), and progress
# columns (TextColumn renders its template with markup on: a terminal's progress bar).
PARSES_MARKUP = {"styled", "from_markup", "TextColumn"}


def _name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def literal_markup(source: str) -> list[tuple[int, str]]:
    """(line, text) of each string argument with markup given to a call that does not parse it."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or _name(node) in PARSES_MARKUP:
            continue
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            parts = arg.values if isinstance(arg, ast.JoinedStr) else [arg]
            for part in parts:
                text = part.value if isinstance(part, ast.Constant) else None
                if isinstance(text, str) and MARKUP.search(text):
                    found.append((node.lineno, text))
    return found


def test_the_scan_finds_markup_outside_styled() -> None:
    source = (
        'console.print(f"[bold green]OK[/] {env}")\n'
        'table.add_row(name, f"[{style}]{label}[/]")\n'
        'console.print(styled("[bold green]OK[/] {}", env))\n'
        'console.print("[1/3] step", markup=False)\n'
    )
    assert [line for line, _ in literal_markup(source)] == [1, 2]


def test_no_command_prints_literal_markup() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {text!r}"
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for line, text in literal_markup(path.read_text())
    ]
    assert offenders == []
