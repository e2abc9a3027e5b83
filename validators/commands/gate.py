"""`gate CANDIDATE [--baseline STACK|RECORD]`: refuse a candidate that fails a check or regresses.

CANDIDATE is a record (file or id), a run report file, or a stack name. For a stack, give the
repeated runs with --run, or let the gate run the validators --repeats times on --env (default:
the builder's `current` env of the stack). The steps: validators/gate/flow.py.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from stackgate.cli import emit_json
from stackgate.cli_numbers import RUNS
from stackgate.cli_paths import OUTPUT_FILE
from stackgate.errors import EXIT_CHECK_FAILED, EXIT_ENVIRONMENT, EXIT_OK
from stackgate.output import console_err
from validators.gate.cli_args import add_policy_arguments, request_from
from validators.gate.flow import run_gate
from validators.gate.policy import DEFAULT_REPEATS
from validators.gate.tables import render_gate
from validators.records.cli_args import add_run_argument, add_store_argument
from validators.records.reference import Lookup
from validators.records.store import RecordStore
from validators.reporting.html import write_report

NAME = "gate"
HELP = "compare a candidate with a known-good record (checks, noise-aware metrics, versions)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("candidate", help="record file/id, run report file, or stack name")
    parser.add_argument(
        "--baseline",
        default=None,
        help="STACK (its newest known-good record) or RECORD (file or id); "
        "default: the candidate's stack",
    )
    add_run_argument(parser, required=False)
    parser.add_argument(
        "--env",
        type=Path,
        default=None,
        help="environment to validate when CANDIDATE is a stack without --run",
    )
    parser.add_argument(
        "--repeats",
        type=RUNS,
        default=None,
        help=f"validation runs (ABBA pairs with --interleave-with) to make when the gate runs "
        f"them (default: the baseline stack's [validation.gate] repeats, else {DEFAULT_REPEATS})",
    )
    parser.add_argument(
        "--interleave-with",
        type=Path,
        default=None,
        metavar="BASELINE_ENV",
        help="re-measure the baseline's env (the record's, checked by tree hash) in ABBA order "
        "with the candidate's runs, so host drift cancels; needs CANDIDATE as a stack name or "
        "manifest (.toml) + --env",
    )
    parser.add_argument("--html", type=OUTPUT_FILE, default=None, help="also write an HTML report")
    parser.add_argument(
        "--keep-runs",
        type=Path,
        default=None,
        metavar="DIR",
        help="when the gate runs the validators: keep each run's report and stderr in DIR "
        "(run-NN.json/.err, or pair-NN-baseline/candidate.json/.err); DIR must be new or empty",
    )
    parser.add_argument("--all", action="store_true", help="list checks that are OK too")
    add_policy_arguments(parser)
    add_store_argument(parser)


def run(args: argparse.Namespace) -> int:
    request = request_from(args)
    html: Path | None = args.html.absolute() if args.html else None
    console = console_err()
    with RecordStore.open(args.store, read_only=True) as store:
        outcome = run_gate(request, Lookup(store), console.print)
    result = outcome.result
    if html:  # said before the verdict, which is the last line
        baseline = outcome.remeasured or outcome.baseline
        write_report(html, outcome.candidate, baseline=baseline, gate_result=result)
        console.print(f"HTML report: {html}")
    render_gate(console, result, show_ok_checks=args.all)
    if args.json:
        emit_json({"ok": result.passed, **result.model_dump(mode="json")})
    if not result.passed:
        return EXIT_CHECK_FAILED
    # Passed, but checks the baseline passed could not run here: INCOMPLETE (the host).
    return EXIT_ENVIRONMENT if result.not_proven_here else EXIT_OK
