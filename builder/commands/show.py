"""`show STACK [--topology T]`: print the resolved manifest (defaults and `extends` applied)."""

from __future__ import annotations

import argparse
import json

from stackgate.cli import emit_json
from stackgate.errors import EXIT_OK
from stackgate.manifest.loading import load_stack
from stackgate.output import console_err, console_out, styled
from stackgate.topology import TOPOLOGIES

NAME = "show"
HELP = "print the resolved manifest: defaults filled in, serving profiles' extends applied"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stack", help="a stack name in stacks/ or a path to a manifest")
    parser.add_argument(
        "--topology",
        choices=TOPOLOGIES,
        default=None,
        help="also print the environment a process gets on this topology",
    )


def run(args: argparse.Namespace) -> int:
    manifest = load_stack(args.stack).manifest
    payload = manifest.model_dump(mode="json")
    if args.topology:
        payload["resolved_environment"] = {
            "topology": args.topology,
            "vars": manifest.env_for(args.topology),
        }
    if args.json:
        emit_json(payload)
    else:  # what the user asked to see: stdout (`| less`, `> file`)
        console_out().print_json(json.dumps(payload))
    console_err().print(
        styled("[bold green]OK[/] {}", f"{manifest.name}: resolved manifest printed on stdout")
    )
    return EXIT_OK
