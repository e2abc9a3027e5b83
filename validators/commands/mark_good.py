"""`mark-good STACK --run RESULT.json [--run ...]`: record a proven stack, or refuse and say why.

Without --run, `--env PATH --repeats N` runs the validators N times itself.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from stackgate.cli import emit_json
from stackgate.cli_numbers import RUNS
from stackgate.cli_output import MarkGoodOutput, MarkGoodRefusal
from stackgate.cli_paths import FOLDER
from stackgate.errors import EXIT_CHECK_FAILED, EXIT_OK
from stackgate.output import console_err, styled
from validators.gate.mark_good import gather_runs, judge, stack_to_mark, store_known_good
from validators.gate.policy import DEFAULT_REPEATS
from validators.gate.stack_policy import GateFlags, decide
from validators.records.cli_args import add_run_argument, add_store_argument

if TYPE_CHECKING:
    from rich.console import Console

NAME = "mark-good"
HELP = "record a stack as known-good when every required validator passed on a matching host"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stack", help="a stack name in stacks/ or a path to a manifest")
    add_run_argument(parser, required=False)
    parser.add_argument(
        "--env",
        type=FOLDER,
        default=None,
        help="the environment the runs judged (default: the reports' env_path); without "
        "--run, the environment to validate --repeats times",
    )
    parser.add_argument(
        "--repeats",
        type=RUNS,
        default=None,
        help="validation runs to make when no --run is given (default: what the stack's gate "
        f"needs per side: its [validation.gate] repeats, else {DEFAULT_REPEATS})",
    )
    parser.add_argument("--image-digest", default=None, help="digest of the image, if one")
    parser.add_argument("--note", default=None, help="free text kept in the record")
    parser.add_argument(
        "--allow-host-mismatch",
        action="store_true",
        help="record even though this host does not match the stack's targets (kept in the "
        "record as host_mismatch; for test stands, never for the real target)",
    )
    parser.add_argument(
        "--export",
        type=FOLDER,
        default=None,
        metavar="DIR",
        help="also write the record as JSON under DIR (e.g. records/)",
    )
    add_store_argument(parser)


def run(args: argparse.Namespace) -> int:
    loaded = stack_to_mark(args.stack)
    decision = decide(GateFlags(repeats=args.repeats), loaded.manifest.validation.gate)
    reports = gather_runs(str(args.stack), loaded, args.runs, args.env, decision.runs)
    console = console_err()
    if len(reports) < decision.policy.min_repeats:
        console.print(
            f"note: {len(reports)} run(s); a gate against {loaded.manifest.name} needs "
            f">= {decision.policy.min_repeats} per side and will call this record's metrics "
            "TOO_FEW",
            markup=False,
            highlight=False,
        )
    judged = judge(loaded, reports, env=args.env, image_digest=args.image_digest,
                   allow_host_mismatch=args.allow_host_mismatch)  # fmt: skip
    if judged.problems:
        return _refused(console, loaded.manifest.name, judged.problems, as_json=args.json)

    def warn(text: str, loud: bool) -> None:
        console.print(
            styled("[bold yellow]WARNING[/]: {}" if loud else "[bold yellow]warning[/]: {}", text)
        )

    stored = store_known_good(loaded, reports, judged, note=args.note, store=args.store,
                              export=args.export, warn=warn)  # fmt: skip
    record = stored.record
    if args.json:
        output = MarkGoodOutput(
            record_id=record.record_id,
            stack=record.stack,
            added=stored.added,
            store=str(stored.store),
            exported=[str(p) for p in stored.exported],
            metrics=sorted(record.metrics),
            runs=record.runs,
        )
        emit_json(output.model_dump())
    verb = "recorded" if stored.added else "already recorded"
    for m in judged.mismatch:
        console.print(styled("[yellow]host mismatch accepted:[/] {}", m))
    for path in stored.exported:
        console.print(f"  exported {path}")
    tree = (judged.build.env_tree_sha256 if judged.build else None) or ""
    console.print(
        styled(
            "[bold green]OK[/] {}",
            f"KNOWN-GOOD {record.label} {verb} in {stored.store}: {len(record.checks)} checks, "
            f"{len(record.metrics)} metrics x {record.runs} run(s), env tree {tree[:12]}",
        )
    )
    return EXIT_OK


def _refused(console: Console, stack: str, problems: list[str], *, as_json: bool) -> int:
    if as_json:
        emit_json(MarkGoodRefusal(stack=stack, refused=problems).model_dump())
    console.print(styled("{} is not marked good:", stack))
    for p in problems:
        console.print(f"  - {p}", markup=False, highlight=False)
    console.print(
        styled(
            "[bold red]REFUSED[/] {}",
            f"{stack} is not marked good: {len(problems)} problem(s) above",
        )
    )
    return EXIT_CHECK_FAILED
