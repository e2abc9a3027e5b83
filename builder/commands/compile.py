"""`compile [OPTIONS] STACK -- CMD...`: run a source build with the stack's job plan exported and the
watchdog watching; record the measured peak RSS per job for the next plan."""

from __future__ import annotations

import argparse

from builder.compile.history import read_history, write_history
from builder.compile.jobs import compile_env, plan_jobs
from builder.compile.watched import run_watched
from builder.lock.resolve import uv_env
from stackgate.cli import emit_json
from stackgate.cli_paths import FOLDER
from stackgate.errors import EXIT_CHECK_FAILED, EXIT_OK, BadInput
from stackgate.layout import venv_root
from stackgate.manifest.loading import load_stack
from stackgate.output import console_err, styled
from stackgate.resource_limits import GIB

NAME = "compile"
HELP = "run a build command under the stack's memory-aware job plan and the watchdog"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stack", help="a stack name in stacks/ or a path to a manifest")
    parser.add_argument(
        "argv", nargs=argparse.REMAINDER, help="-- then the build command (options go before STACK)"
    )
    parser.add_argument("--cwd", type=FOLDER, default=None, help="run the command here")
    parser.add_argument("--venv-root", type=FOLDER, default=None, help="where history is kept")
    parser.add_argument(
        "--no-watchdog", action="store_true", help="measure only, never pause (for proofs)"
    )
    parser.add_argument(
        "--no-history", action="store_true", help="plan from the manifest, ignore measurements"
    )


def run(args: argparse.Namespace) -> int:
    argv = list(args.argv or [])
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise BadInput("give the build command after --, e.g. `compile cu130 -- make -C src`")
    loaded = load_stack(args.stack)
    stack_dir = venv_root(args.venv_root) / loaded.manifest.name
    history = None if args.no_history else read_history(stack_dir)
    plan = plan_jobs(
        loaded.manifest.build,
        measured_peak_per_job_bytes=history.peak_rss_per_job_bytes if history else None,
    )
    console = console_err()
    console.print(f"job plan: {plan.summary()}", highlight=False)
    for reason in plan.reasons:
        console.print(f"  {reason}", highlight=False)
    result = run_watched(
        argv,
        env=uv_env(compile_env(plan, loaded.manifest.build)),
        cwd=args.cwd,
        limit_bytes=max(plan.usable_memory_bytes, 1),
        pause_at_bytes=plan.memory_budget_bytes or None,
        log_path=stack_dir / "compile.log",
        on_line=lambda line: console.print(line, markup=False, highlight=False),
        pause=not args.no_watchdog,
    )
    watch = result.watch
    if result.returncode == 0 and watch.jobs_seen and watch.peak_job_rss:
        write_history(
            stack_dir, peak=watch.peak_job_rss, jobs_seen=watch.jobs_seen, lock_hash="compile"
        )
    if args.json:
        emit_json(
            {
                "ok": result.returncode == 0,
                "returncode": result.returncode,
                "plan": plan.model_dump(mode="json"),
                "peak_total_rss": watch.peak_total_rss,
                "peak_job_rss": watch.peak_job_rss,
                "jobs_seen": watch.jobs_seen,
                "max_concurrent_jobs": watch.max_concurrent_jobs,
                "pauses": watch.pauses,
                "resumes": watch.resumes,
            }
        )
    verdict = "[bold green]OK[/]" if result.returncode == 0 else "[bold red]FAILED[/]"
    console.print(
        styled(
            verdict + " {}",
            f"the command exited {result.returncode}; peak RSS "
            f"{watch.peak_total_rss / GIB:.2f} GiB, per job {watch.peak_job_rss / GIB:.2f} GiB "
            f"over {watch.jobs_seen} job(s), {watch.pauses} pause(s)",
        )
    )
    return EXIT_OK if result.returncode == 0 else EXIT_CHECK_FAILED
