"""`schema [--write]`: print or regenerate the JSON schemas of manifests and rules."""

from __future__ import annotations

import argparse
import json

from stackgate.cli import emit_json
from stackgate.cli_hint import cli_command
from stackgate.errors import EXIT_CHECK_FAILED, EXIT_OK
from stackgate.manifest.schema import schema_dir, schemas
from stackgate.output import console_err, styled

NAME = "schema"
HELP = "write (--write) or verify the JSON schemas in stacks/schema/"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--write", action="store_true", help="regenerate the committed files")


def run(args: argparse.Namespace) -> int:
    folder = schema_dir()
    stale: list[str] = []
    for filename, text in schemas().items():
        target = folder / filename
        if args.write:
            folder.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        elif not target.is_file() or not _same_document(target.read_text(encoding="utf-8"), text):
            stale.append(filename)
    if args.json:
        emit_json({"ok": not stale, "stale": stale, "folder": str(folder)})
    if stale:
        console_err().print(
            styled(
                "[bold red]FAILED[/] {}",
                f"stale schemas: {', '.join(stale)}; run `{cli_command('schema --write')}`",
            )
        )
        return EXIT_CHECK_FAILED
    verdict = "schemas written" if args.write else "schemas are current"
    console_err().print(styled("[bold green]OK[/] {}", verdict))
    return EXIT_OK


def _same_document(committed: str, generated: str) -> bool:
    """Equal as JSON: pydantic releases print the same bound as 0 or 0.0."""
    try:
        return bool(json.loads(committed) == json.loads(generated))
    except ValueError:
        return False
