"""`reproduce RECORD|STACK`: rebuild a known-good record here -> REPRODUCED / DIFFERS / FAILED."""

from __future__ import annotations

import argparse

from rich.table import Table

from stackgate.cli import emit_json
from stackgate.cli_numbers import RUNS
from stackgate.cli_paths import FOLDER
from stackgate.credentials import redact
from stackgate.errors import EXIT_CHECK_FAILED, EXIT_OK, BadInput
from stackgate.layout import venv_root
from stackgate.output import console_err, print_table, styled
from stackgate.topology import TOPOLOGIES
from validators.gate.cli_args import add_policy_arguments, policy_from
from validators.gate.policy import DEFAULT_REPEATS
from validators.gate.reproduce import ReproduceOptions, ReproduceOutcome, reproduce
from validators.gate.tables import metrics_table, print_checks
from validators.records.cli_args import add_store_argument
from validators.records.model import Record
from validators.records.resolve import resolve_record
from validators.records.store import RecordStore

NAME = "reproduce"
HELP = "rebuild a known-good record on this host and compare env, checks and numbers"

_STYLE = {"REPRODUCED": "bold green", "DIFFERS": "bold yellow", "FAILED": "bold red"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("record", help="RECORD (file or id) or STACK (its newest known-good)")
    parser.add_argument(
        "--venv-root",
        type=FOLDER,
        default=None,
        help="where to build (default: the builder's, <repo>/envs)",
    )
    parser.add_argument(
        "--wheelhouse",
        type=FOLDER,
        default=None,
        help="build offline from this folder (`builder wheelhouse`)",
    )
    parser.add_argument(
        "--topology",
        choices=TOPOLOGIES,
        default=None,
        help="env profile (default: the record's, so the env tree can match)",
    )
    parser.add_argument(
        "--base-site",
        type=FOLDER,
        default=None,
        metavar="PATH",
        help="this host's copy of the site-packages the record's env was layered over "
        "(checked against the record's versions and file hashes; the record's own path is "
        "where its machine kept it and is never used)",
    )
    parser.add_argument("--python", default=None, help="interpreter for the build")
    parser.add_argument(
        "--index-map",
        action="append",
        default=[],
        metavar="NAME=URL",
        help="passed to the builder (mirrors, local folders)",
    )
    parser.add_argument(
        "--runs",
        type=RUNS,
        default=None,
        help="validation runs (default: as many as the record holds, at most "
        f"{DEFAULT_REPEATS}; 1 on a host of another class, whose numbers are not compared)",
    )
    parser.add_argument(
        "--no-validate", action="store_true", help="build and compare the env tree only"
    )
    add_policy_arguments(parser)
    add_store_argument(parser)


def _render(outcome: ReproduceOutcome) -> None:
    console = console_err()
    if outcome.host:
        table = Table(title="this host vs the record's")
        for col in ("field", "recorded", "here", "impact"):
            table.add_column(col)
        for d in outcome.host:
            table.add_row(d.field, d.recorded, d.here, d.impact)
        print_table(console, table)
    if outcome.gate is not None:
        print_checks(console, outcome.gate, show_ok=False)
        if outcome.gate.metrics:
            print_table(console, metrics_table(outcome.gate))
    console.print(
        f"env tree: recorded {str(outcome.recorded_tree)[:16]}, built "
        f"{str(outcome.built_tree)[:16]}"
        + (
            " (equal)" if outcome.built_tree and outcome.built_tree == outcome.recorded_tree else ""
        ),
        markup=False,
        highlight=False,
    )
    for line in outcome.host_inputs:
        console.print(f"  host input: {line}", markup=False, highlight=False)
    console.print("time: " + " ".join(f"{k}={v:.1f}s" for k, v in outcome.timings_s.items()))
    for note in outcome.notes:
        console.print(f"  note: {note}", markup=False, highlight=False)
    for part, state in outcome.parts.items():
        console.print(f"{part:>12}: {state}", markup=False, highlight=False)
    for reason in outcome.reasons:
        console.print(f"  - {reason}", markup=False, highlight=False)
    console.print(
        styled(
            f"[{_STYLE[outcome.verdict]}]{{}}[/] {{}}",
            outcome.verdict,
            f"{outcome.record}" + (f" in {outcome.env}" if outcome.env else "") + _why(outcome),
        )
    )


def _why(outcome: ReproduceOutcome) -> str:
    """What the verdict rests on, named on its own line: each reason's head (`host gpu.count`,
    `env tree hash differs`, `check runtime.gpu`), so that a DIFFERS whose env part is identical
    says it is the host that differs."""
    if not outcome.reasons:
        return ""
    heads = list(dict.fromkeys(r.split(":", 1)[0] for r in outcome.reasons))
    shown = ", ".join(heads[:SHOWN_HEADS]) + (
        f", +{len(heads) - SHOWN_HEADS} more" if len(heads) > SHOWN_HEADS else ""
    )
    return f": {len(outcome.reasons)} reason(s) above ({shown})"


SHOWN_HEADS = 4  # a verdict line, not the list: the reasons are printed above it


def check_arguments(args: argparse.Namespace) -> None:
    """What can be checked here is checked before the host is probed or anything is built.
    The builder checks the rest (index names against the record's manifest, --python) before
    it creates anything; its exit 2 is ours (validators.gate.reproduce._build)."""
    if args.wheelhouse is not None and not args.wheelhouse.is_dir():
        raise BadInput(f"--wheelhouse {args.wheelhouse}: no such folder")
    if args.base_site is not None and not args.base_site.is_dir():
        raise BadInput(f"--base-site {args.base_site}: no such folder")
    if args.runs is not None and args.runs < 1:
        raise BadInput(f"--runs {args.runs}: give at least 1")
    if args.venv_root is not None:
        venv_root(args.venv_root)  # a path that is not a folder -> exit 2
    for item in args.index_map:
        name, sep, url = item.partition("=")
        if not sep or not name or not url:
            raise BadInput(f"--index-map '{redact(item)}': write NAME=URL")


def default_runs(record: Record) -> int:
    """As many runs as the record merges (at most the gate's default), so the numbers are
    judged at the record's own power; 1 without metrics. On a host of another class the
    numbers are not compared, and reproduce says so before the first run (it cannot know the
    host class before the probe; `--runs 1` saves the time)."""
    return min(record.runs, DEFAULT_REPEATS) if record.metrics else 1


def run(args: argparse.Namespace) -> int:
    check_arguments(args)
    with RecordStore.open(args.store, read_only=True) as store:
        record = resolve_record(args.record, store)
    runs = args.runs if args.runs is not None else default_runs(record)
    options = ReproduceOptions(
        venv_root=args.venv_root,
        wheelhouse=args.wheelhouse,
        base_site=args.base_site,
        topology=args.topology,
        python=args.python,
        index_map=args.index_map,
        validate=not args.no_validate,
        runs=runs,
        runs_given=args.runs is not None,
        policy=policy_from(args),
    )
    console_err().print(
        f"reproducing {record.label} ({record.stack}, env tree "
        f"{str(record.build.env_tree_sha256)[:12]})"
    )
    outcome = reproduce(record, options)
    if args.json:
        emit_json(outcome.as_dict())
    _render(outcome)
    return EXIT_OK if outcome.verdict == "REPRODUCED" else EXIT_CHECK_FAILED
