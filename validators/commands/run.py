"""`python -m validators run STACK --env PATH [--only GROUP...] [--keep-going] [--junit FILE] [--image REF]`

Runs the manifest's required groups cheapest first (host, static, runtime, serve-bench) and
stops at the first failing group unless --keep-going. With --image, the same command runs
inside a built image (its env at /opt/stackgate/env) and its JSON report comes back here.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from stackgate.cli_hint import cli_command
from stackgate.cli_paths import FOLDER, OUTPUT_FILE
from stackgate.errors import BadInput, EnvironmentProblem
from stackgate.layout import current_env
from stackgate.manifest.loading import load_stack
from stackgate.topology import TOPOLOGIES
from stackgate.validator_groups import ORDER, need_env, need_gpus
from validators.commands._common import env_path, finish_report
from validators.core.checks import is_known
from validators.core.context import RunContext
from validators.core.options import option_help, parse_options
from validators.core.pipeline import run_pipeline
from validators.core.results import Report

NAME = "run"
HELP = "run the validator groups on an environment (host, static, runtime, serve-bench)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stack", help="stack name or manifest")
    parser.add_argument(
        "--env", help="the environment to judge (default for nox: envs/<stack>/current)"
    )
    parser.add_argument(
        "--only",
        nargs="+",
        choices=ORDER,
        metavar="GROUP",
        help=f"run only these groups ({', '.join(ORDER)})",
    )
    parser.add_argument(
        "--keep-going", action="store_true", help="run every group even after a failure"
    )
    parser.add_argument(
        "--junit", type=OUTPUT_FILE, metavar="FILE", help="also write JUnit XML here"
    )
    parser.add_argument("--image", metavar="REF", help="run the validators inside this built image")
    parser.add_argument(
        "--topology",
        choices=TOPOLOGIES,
        help="interconnect profile to test (default: detected via NVML)",
    )
    parser.add_argument("--serve-profile", help="serving profile for serve-bench")
    parser.add_argument("--out-dir", type=FOLDER, help="folder for logs the groups keep")
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a group option, e.g. targets=12.0a or nccl_iters=200 (every KEY below)",
    )
    parser.epilog = option_help()
    parser.formatter_class = argparse.RawDescriptionHelpFormatter


def run(args: argparse.Namespace) -> int:
    loaded = load_stack(args.stack)
    options = parse_options(args.option)  # a bad --option is exit 2 before anything runs
    validation = loaded.manifest.validation
    for key, named in (
        ("accepted_findings", validation.accepted_findings),
        ("refused_findings", validation.refused_findings),
    ):
        unknown = [c for c in named if not is_known(c)]
        if unknown:
            raise BadInput(
                f"{loaded.path}: validation.{key} names checks no validator emits",
                details=[f"{c!r} (see validators/core/checks.py)" for c in unknown],
            )
    groups = args.only or list(loaded.manifest.validation.required)
    if args.image:
        report = _run_in_image(args, loaded.manifest.name, groups)
        return finish_report(report, args)
    path = env_path(args.env) if args.env else default_env(loaded.manifest.name, groups)
    ctx = RunContext(
        stack=loaded,
        env_path=path,
        topology=args.topology,
        keep_going=args.keep_going,
        serve_profile=args.serve_profile,
        out_dir=Path(args.out_dir) if args.out_dir else None,
        options=options,
    )
    return finish_report(run_pipeline(ctx, groups), args)


def default_env(stack: str, groups: list[str]) -> Path | None:
    """The builder's selected env (stackgate.layout: <venv root>/<stack>/current)."""
    current = current_env(stack)
    if current.exists():
        return current
    if need_env(groups):
        raise BadInput(
            f"no --env given and no built environment at {current}",
            details=[f"build it first: {cli_command(['build', stack])}   (or pass --env PATH)"],
        )
    return None


def _run_in_image(args: argparse.Namespace, stack: str, groups: list[str]) -> Report:
    try:
        from stackgate.containers import run as container_run
    except ImportError as exc:
        raise EnvironmentProblem(f"--image needs stackgate.containers: {exc}") from None
    argv = [
        container_run.TOOL_PYTHON,
        "-m",
        "validators",
        "run",
        f"{container_run.IMAGE_STACK_DIR}/{stack}.toml",
        "--env",
        container_run.IMAGE_ENV,
        "--json",
        "--only",
        *groups,
    ]
    if args.keep_going:
        argv.append("--keep-going")
    if args.topology:
        argv += ["--topology", args.topology]
    for item in args.option:
        argv += ["--option", item]
    # Groups that need no GPUs (static) run on any engine, buildah too, which cannot pass them.
    from validators.core.runs import parse_run_output

    done = container_run.run_in_image(args.image, argv, gpus=need_gpus(groups))
    return parse_run_output(
        done.stdout, done.stderr, done.returncode, what=f"inside the image {args.image}"
    )
