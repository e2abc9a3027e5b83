"""`python -m validators static [STACK] --env PATH [--targets 12.0a]`: no GPU needed."""

from __future__ import annotations

import argparse

from stackgate.loading import load_stack
from validators.commands._common import env_path, finish_results
from validators.pipeline import apply_accepted
from validators.static.group import StaticInputs, run_static, targets_from

NAME = "static"
HELP = "ABI, GPU-arch and distribution checks on an installed environment (no GPU needed)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stack", nargs="?", help="stack name or manifest (pins, lock, targets)")
    parser.add_argument("--env", required=True, help="the environment to check (a venv folder)")
    parser.add_argument(
        "--targets", action="append", help="GPU archs, e.g. 12.0a (repeat or comma)"
    )


def run(args: argparse.Namespace) -> int:
    manifest = load_stack(args.stack).manifest if args.stack else None
    path = env_path(args.env)
    assert path is not None
    results = run_static(
        StaticInputs(
            env_path=path,
            stack=manifest.name if manifest else None,
            manifest=manifest,
            targets=targets_from(args.targets, manifest),
        )
    )
    if manifest is not None:
        results = apply_accepted(results, manifest.validation.accepted_findings)
    return finish_results(results, f"static checks: {path}", args)
