"""`plan STACK`: print the compile-job plan for this host (inputs, reasons, exported vars)."""

from __future__ import annotations

import argparse

from builder.compile.history import read_history
from builder.compile.jobs import compile_env, plan_jobs
from stackgate.cli import emit_json
from stackgate.cli_paths import FOLDER
from stackgate.errors import EXIT_OK
from stackgate.layout import venv_root
from stackgate.manifest.loading import load_stack
from stackgate.output import console_err, styled

NAME = "plan"
HELP = "show how many compile jobs a source build of the stack may run here, and why"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stack", help="a stack name in stacks/ or a path to a manifest")
    parser.add_argument("--venv-root", type=FOLDER, default=None, help="where history is kept")


def run(args: argparse.Namespace) -> int:
    loaded = load_stack(args.stack)
    history = read_history(venv_root(args.venv_root) / loaded.manifest.name)
    plan = plan_jobs(
        loaded.manifest.build,
        measured_peak_per_job_bytes=history.peak_rss_per_job_bytes if history else None,
    )
    if args.json:
        emit_json(
            {
                "ok": True,
                "stack": loaded.manifest.name,
                "plan": plan.model_dump(mode="json"),
                "env": compile_env(plan, loaded.manifest.build),
            }
        )
    console = console_err()
    console.print(styled("[bold]{}[/]: {}", loaded.manifest.name, plan.summary()))
    for reason in plan.reasons:
        console.print(f"  {reason}", highlight=False)
    console.print(
        "  exports: "
        + " ".join(f"{k}={v}" for k, v in compile_env(plan, loaded.manifest.build).items()),
        highlight=False,
        markup=False,
    )
    console.print(styled("[bold green]OK[/] {}", f"{loaded.manifest.name}: {plan.summary()}"))
    return EXIT_OK
