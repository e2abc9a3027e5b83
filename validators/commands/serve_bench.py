"""`serve-bench STACK --env PATH --profile NAME`: serve, check output, benchmark, tear down."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from pydantic import ValidationError
from rich.console import Console

from stackgate.cli import emit_json
from stackgate.cli_numbers import PORT
from stackgate.cli_paths import FOLDER
from stackgate.errors import EXIT_OK, BadInput
from stackgate.layout import current_env
from stackgate.manifest.loading import LoadedStack, load_stack
from stackgate.output import console_err, styled
from stackgate.safe_text import for_terminal
from stackgate.topology import TOPOLOGIES
from validators.commands._common import exit_code
from validators.commands.run import default_env
from validators.core.context import RunContext
from validators.core.options import GroupOptions, ServeOptions
from validators.core.results import Result
from validators.core.undecided import undecided
from validators.reporting.table import failures_first, verdict_line
from validators.serve.adapters import DEFAULT_PORTS, build_launch
from validators.serve.group import bench_settings, run_group
from validators.serve.interrupts import Interrupts

NAME = "serve-bench"
HELP = "start a serving profile, check its output and speed, and tear it down (exit 1 on FAIL)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stack", help="a stack name in stacks/ or a path to a manifest")
    parser.add_argument(
        "--env",
        type=FOLDER,
        default=None,
        help="the environment (venv) to serve from (default: envs/STACK/current)",
    )
    parser.add_argument(
        "--profile", default=None, help="serving profile (default: [validation] serve_profile)"
    )
    parser.add_argument(
        "--topology",
        choices=TOPOLOGIES,
        default=None,
        help="the stack's environment profile for this interconnect (default: detected via NVML)",
    )
    parser.add_argument(
        "--reference",
        type=Path,
        default=None,
        help="known-good greedy outputs to compare against (JSON)",
    )
    parser.add_argument(
        "--record-reference",
        type=Path,
        default=None,
        help="record this run's greedy outputs as the known-good reference",
    )
    parser.add_argument(
        "--jsonl",
        type=Path,
        default=None,
        help="append benchmark records here (default OUT_DIR/serve-bench.jsonl)",
    )
    parser.add_argument(
        "--out-dir",
        type=FOLDER,
        default=Path("serve-bench-out"),
        help="server logs and results (default ./serve-bench-out)",
    )
    parser.add_argument(
        "--concurrency",
        default=None,
        help="comma-separated concurrency levels, overriding the profile's",
    )
    parser.add_argument("--port", type=PORT, default=None, help="fixed port (fail if taken)")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the launch command and environment, start nothing",
    )


def _levels(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise BadInput(f"--concurrency {text!r}: expected comma-separated integers") from None


def run(args: argparse.Namespace) -> int:
    # SIGTERM (CI timeouts, `timeout`) and Ctrl-C end the command with exit 130 after the
    # server is torn down, whatever phase they land in: recorded for the whole command and
    # raised only where unwinding is safe (validators/serve/interrupts.py).
    with Interrupts().installed() as interrupts:
        return _run(args, interrupts)


def _run(args: argparse.Namespace, interrupts: Interrupts) -> int:
    loaded = load_stack(args.stack)
    # The same arguments are checked for a dry run as for a real one: a dry run that accepts
    # `--port 99999` or `--concurrency 0` promised a command the real run refuses.
    try:
        serve = ServeOptions(
            reference=args.reference,
            record_reference=args.record_reference,
            jsonl=args.jsonl,
            concurrencies=_levels(args.concurrency),
            port=args.port,
        )
    except ValidationError as exc:
        problems = [f"--{str(e['loc'][0]).replace('_', '-')}: {e['msg']}" for e in exc.errors()]
        raise BadInput("invalid serve-bench arguments", details=problems) from None
    if args.dry_run:
        return _dry_run(args, loaded, serve)
    env = args.env or default_env(loaded.manifest.name, ["serve-bench"])
    if env is None or not (env / "bin" / "python").exists():
        raise BadInput(f"{env}: not an environment (no bin/python)")
    ctx = RunContext(
        stack=loaded,
        env_path=env.absolute(),
        topology=args.topology,
        serve_profile=args.profile,
        out_dir=args.out_dir.resolve(),
        options=GroupOptions(serve=serve),
    )
    interrupts.checkpoint()  # nothing launched yet
    results = run_group(ctx, interrupts)
    interrupts.checkpoint()  # one that came during the teardown: exit 130 all the same
    failed = any(r.status in ("FAIL", "ERROR") for r in results)
    incomplete = undecided(results)
    if args.json:
        emit_json(
            {
                "ok": not failed and not incomplete,
                "stack": loaded.manifest.name,
                "results": [r.model_dump() for r in results],
                **({"incomplete": incomplete} if incomplete else {}),
            }
        )
    console = console_err()
    colour = {"PASS": "green", "FAIL": "bold red", "ERROR": "bold red", "SKIP": "yellow"}
    for r in failures_first(results):
        console.print(
            styled(f"[{colour[r.status]}]{{}}[/] {{}}: {{}}", f"{r.status:5}", r.check, r.reason)
        )
        _print_crash(console, r)
    console.print(verdict_line(results, f"serve-bench {loaded.manifest.name}", None, incomplete))
    return exit_code(results, incomplete)


def _print_crash(console: Console, result: Result) -> None:
    """After a crash: the server log's last lines and where the whole log is."""
    tail = result.evidence.get("last_log_lines")
    log = result.evidence.get("log")
    if result.status not in ("FAIL", "ERROR") or not (tail or log):
        return
    if isinstance(tail, list):
        for line in tail[-20:]:
            console.print(f"    | {line}")
    elif isinstance(tail, str):
        for line in tail.splitlines()[-20:]:
            console.print(f"    | {line}")
    if log:
        console.print(f"    log: {log}")


def _dry_run(args: argparse.Namespace, loaded: LoadedStack, serve: ServeOptions) -> int:
    """The exact argv and environment serve-bench would launch (port as the profile says, or
    the engine default)."""
    manifest = loaded.manifest
    name = args.profile or manifest.validation.serve_profile
    if name is None or name not in manifest.serving:
        known = ", ".join(sorted(manifest.serving)) or "none"
        raise BadInput(f"unknown serving profile '{name}' (known: {known})")
    profile = manifest.serving[name]
    bench_settings(profile, serve.concurrencies)  # what the real run would refuse
    env = args.env or current_env(manifest.name)
    port = args.port or profile.port or DEFAULT_PORTS.get(profile.engine, 8000)
    spec = build_launch(
        manifest,
        profile,
        python=str(env / "bin" / "python"),
        host="127.0.0.1",
        port=port,
        topology=args.topology,
    )
    verdict = styled(
        "[bold green]OK[/] {}",
        f"serve-bench {manifest.name} --profile {name}: dry run, nothing started; "
        + ("the launch as JSON on stdout" if args.json else "the launch script on stdout"),
    )
    if args.json:
        emit_json(
            {
                "ok": True,
                "profile": name,
                "argv": spec.argv,
                "env": spec.env,
                "ready_pattern": spec.ready_pattern,
                "health": spec.base_url + spec.health_path,
                "notes": spec.notes,
            }
        )
        console_err().print(verdict)
        return EXIT_OK
    # What the user asked to see is a shell script: stdout, plain, never wrapped.
    lines = [f"# serve-bench {manifest.name} --profile {name}"]
    lines += [f"export {key}={shlex.quote(value)}" for key, value in sorted(spec.env.items())]
    lines.append(shlex.join(spec.argv))
    sys.stdout.write(for_terminal("\n".join(lines)) + "\n")
    sys.stdout.flush()
    err = console_err()
    for note in spec.notes:
        err.print(f"note: {note}", markup=False, highlight=False)
    err.print(verdict)  # the last line, as every command's
    return EXIT_OK
