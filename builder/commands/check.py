"""`check STACK`: validate the manifest and evaluate the stack rules, before any download."""

from __future__ import annotations

import argparse
from pathlib import Path

from stackgate.cli import emit_json
from stackgate.errors import EXIT_CHECK_FAILED, EXIT_OK
from stackgate.lines import lines_err
from stackgate.manifest.loading import load_stack
from stackgate.manifest.rules import StackFacts, evaluate, load_rules
from stackgate.paths import display_path

NAME = "check"
HELP = (
    "validate a manifest and its compatibility rules (exit 1 when a rule with severity error fires)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stack", help="a stack name in stacks/ or a path to a manifest")
    parser.add_argument(
        "--rules", type=str, default=None, help="rules file (default stacks/rules.toml)"
    )


def run(args: argparse.Namespace) -> int:
    loaded = load_stack(args.stack)
    rules = load_rules(Path(args.rules) if args.rules else None)
    findings = evaluate(rules, StackFacts.from_manifest(loaded.manifest), scope="stack")
    errors = [f for f in findings if f.severity == "error"]
    ok = not errors
    if args.json:
        emit_json(
            {
                "ok": ok,
                "stack": loaded.manifest.name,
                "manifest": display_path(loaded.path),
                "rules_evaluated": sum(1 for r in rules if not r.needs_host),
                "findings": [f.as_dict() for f in findings],
            }
        )
    out = lines_err()  # rich only on a terminal: piped, `check` never imports it
    for note in loaded.notes:
        out.plain(f"note: {display_path(loaded.path)}: {note}")
    for f in findings:
        style = "bold red" if f.severity == "error" else "yellow"
        out.styled(f"[{style}]{{}}[/] {{}}", f.severity, f.rule)
        out.plain(f"    {f.message}")
        if f.remedy:
            out.plain(f"    remedy: {f.remedy}")
    verdict = "[bold red]REFUSED[/]" if errors else "[bold green]OK[/]"
    out.styled(
        verdict + " {}",
        f"{display_path(loaded.path)}: {len(errors)} error(s), "
        f"{len(findings) - len(errors)} warning(s)",
    )
    return EXIT_OK if ok else EXIT_CHECK_FAILED
