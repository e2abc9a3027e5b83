"""`verify STACK`: hash the stack's selected env again and compare it with its build record."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from stackgate.build_record import read_build_record
from stackgate.cli import emit_json
from stackgate.cli_hint import cli_command
from stackgate.cli_paths import FOLDER
from stackgate.envtree import check_tree
from stackgate.envtree.digests import DigestCache
from stackgate.errors import EXIT_CHECK_FAILED, EXIT_OK, BadInput
from stackgate.layout import EnvLayout, venv_root
from stackgate.manifest.loading import load_stack
from stackgate.output import console_err, styled
from stackgate.paths import display_path

NAME = "verify"
HELP = "check that the stack's env still holds what its build record says (tree hash)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stack", help="a stack name in stacks/ or a path to a manifest")
    parser.add_argument(
        "--venv-root",
        type=FOLDER,
        default=None,
        help="where envs live (default <repo>/envs, or $STACKGATE_VENV_ROOT)",
    )
    parser.add_argument(
        "--env", type=FOLDER, default=None, help="an env folder (default: the stack's `current`)"
    )


def run(args: argparse.Namespace) -> int:
    name = load_stack(args.stack).manifest.name
    layout = EnvLayout(venv_root(args.venv_root).resolve(), name)
    env: Path = args.env or layout.selected()
    if not env.is_dir():
        raise BadInput(f"{display_path(env)}: no env selected for {name}; build it first")
    record = read_build_record(env)
    if record.stack != name:
        # its own tree would match its own record: OK for an env of another stack
        raise BadInput(f"{display_path(env)}: built for stack '{record.stack}', not '{name}'")
    started = time.monotonic()
    with DigestCache() as cache:
        check = check_tree(env, record.tree.sha256, scheme=record.tree.scheme, cache=cache)
    seconds = time.monotonic() - started
    if args.json:
        emit_json(
            {
                "ok": check.ok,
                "stack": name,
                "env": str(check.env),
                "recorded": check.recorded_sha256,
                "actual": check.tree.sha256,
                "files": check.tree.files,
                "differing": check.explain(),
                "seconds": round(seconds, 3),
            }
        )
    console = console_err()
    if check.ok:
        console.print(
            styled(
                "[bold green]OK[/] {}",
                f"{display_path(check.env)}: tree {check.tree.sha256[:16]} "
                f"({check.tree.files} files) matches its build record ({seconds:.2f} s)",
            )
        )
        return EXIT_OK
    console.print(
        styled(
            "[bold red]CHANGED[/] {}",
            f"{display_path(check.env)}: tree {check.tree.sha256[:16]} now, "
            f"{check.recorded_sha256[:16]} recorded",
        )
    )
    for line in check.explain():
        console.print(f"  - {line}", markup=False, highlight=False)
    console.print(f"repair: {cli_command(['build', name, '--repair'])} (a fresh copy beside it)")
    return EXIT_CHECK_FAILED
