"""`mark-good STACK --run RESULT.json [--run ...]`: record a proven stack, or refuse and say why.

Without --run, `--env PATH --repeats N` runs the validators N times itself.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from stackgate.cli import emit_json
from stackgate.cli_numbers import RUNS
from stackgate.cli_output import MarkGoodOutput, MarkGoodRefusal
from stackgate.cli_paths import FOLDER
from stackgate.errors import EXIT_CHECK_FAILED, EXIT_OK, BadInput
from stackgate.loading import load_stack
from stackgate.output import console_err, styled
from validators.core.gpu_needs import refuse_without_gpus
from validators.core.runs import run_validations
from validators.gate.candidate import env_of, host_of
from validators.gate.policy import DEFAULT_REPEATS
from validators.gate.stack_policy import GateFlags, decide
from validators.records.build_facts import read_build_facts
from validators.records.cli_args import add_run_argument, add_store_argument
from validators.records.clock import ahead_of_evidence, own_clock, parse, stamp_time
from validators.records.compose import compose_record, qualify
from validators.records.env_verify import require_env_matches
from validators.records.fingerprint import target_mismatch
from validators.records.json_files import EXPORT_NAME, export_records
from validators.records.model import BuildFacts
from validators.records.reference import parse_reference
from validators.records.resolve import committed_records_dir, read_report
from validators.records.run_set import run_set_problems
from validators.records.store import RecordStore

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
    ref = parse_reference(args.stack)
    if ref.kind == "file":
        raise BadInput(
            f"{ref}: a record or run report file, not a stack (give the stack's name or its "
            "manifest .toml; the runs go in --run)"
        )
    loaded = load_stack(ref.text)  # a name not in stacks/: exit 2 with the known stacks
    decision = decide(GateFlags(repeats=args.repeats), loaded.manifest.validation.gate)
    if args.runs:
        reports = [read_report(p) for p in args.runs]
    elif args.env is not None:
        refuse_without_gpus(loaded.manifest, "mark-good")
        reports = run_validations(str(args.stack), args.env, decision.runs)
    else:
        raise BadInput("give the runs (--run RESULT.json, once per run) or --env PATH to run them")
    console = console_err()
    if len(reports) < decision.policy.min_repeats:
        console.print(
            f"note: {len(reports)} run(s); a gate against {loaded.manifest.name} needs "
            f">= {decision.policy.min_repeats} per side and will call this record's metrics "
            "TOO_FEW",
            markup=False,
            highlight=False,
        )
    problems = qualify(loaded, reports)
    host = host_of(reports)
    mismatch = target_mismatch(host, loaded.manifest)
    if mismatch and not args.allow_host_mismatch:
        problems.extend(f"host: {m}" for m in mismatch)
    env = env_of(reports, args.env)
    build: BuildFacts | None = None
    if env is None:
        problems.append("no environment: give --env (the reports name none)")
    else:
        build = read_build_facts(env, image_digest=args.image_digest)
        problems.extend(run_set_problems(loaded.manifest.name, reports, env, build))
    if problems:
        if args.json:
            emit_json(MarkGoodRefusal(stack=loaded.manifest.name, refused=problems).model_dump())
        console.print(styled("{} is not marked good:", loaded.manifest.name))
        for p in problems:
            console.print(f"  - {p}", markup=False, highlight=False)
        console.print(
            styled(
                "[bold red]REFUSED[/] {}",
                f"{loaded.manifest.name} is not marked good: {len(problems)} problem(s) above",
            )
        )
        return EXIT_CHECK_FAILED
    assert env is not None and build is not None
    if build.env_tree_sha256 is None:
        raise BadInput(f"{env}: the build record has no env tree hash")
    if build.image_digest is None:
        require_env_matches(env, build)
    record = compose_record(
        loaded,
        reports,
        build=build,
        host=host,
        kind="known-good",
        note=args.note,
        host_mismatch=mismatch,
    )
    with RecordStore.open(args.store) as store:
        # This host's clock dates the record: plainly wrong is exit 3 (nothing written),
        # behind the store's newest record is a warning (records/clock.py).
        made_from = [(f"run {i}'s start", r.started_at) for i, r in enumerate(reports, 1)]
        for warning in own_clock(made_from, store.newest_created_at(), parse(record.created_at)):
            console.print(styled("[bold yellow]warning[/]: {}", warning))
        seen = [store.newest_created_at(), *_newest_file_stamps(record.stack, args.export)]
        if loud := ahead_of_evidence(record.created_at, seen):
            console.print(styled("[bold yellow]WARNING[/]: {}", loud))
        added = store.add(record)
        exported = export_records(store, args.export, record.stack).written if args.export else []
        where = store.path
    if args.json:
        output = MarkGoodOutput(
            record_id=record.record_id,
            stack=record.stack,
            added=added,
            store=str(where),
            exported=[str(p) for p in exported],
            metrics=sorted(record.metrics),
            runs=record.runs,
        )
        emit_json(output.model_dump())
    verb = "recorded" if added else "already recorded"
    for m in mismatch:
        console.print(styled("[yellow]host mismatch accepted:[/] {}", m))
    for path in exported:
        console.print(f"  exported {path}")
    console.print(
        styled(
            "[bold green]OK[/] {}",
            f"KNOWN-GOOD {record.label} {verb} in {where}: {len(record.checks)} checks, "
            f"{len(record.metrics)} metrics x {record.runs} run(s), env tree "
            f"{(build.env_tree_sha256 or '')[:12]}",
        )
    )
    return EXIT_OK


def _newest_file_stamps(stack: str, export: Path | None) -> list[str | None]:
    """The newest export-name stamp of the stack's record files, committed and in --export."""
    out: list[str | None] = []
    for folder in (committed_records_dir() / stack, *([export / stack] if export else [])):
        try:
            names = [p.name for p in folder.iterdir()]
        except OSError:
            continue
        stamps = [m["stamp"] for m in map(EXPORT_NAME.match, names) if m]
        out.append(stamp_time(max(stamps)) if stamps else None)
    return out
