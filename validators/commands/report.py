"""`report CANDIDATE [--baseline REF] --out FILE.html`: the self-contained HTML report."""

from __future__ import annotations

import argparse

from stackgate.cli import emit_json
from stackgate.cli_hint import cli_command
from stackgate.cli_paths import FOLDER, OUTPUT_FILE
from stackgate.errors import EXIT_CHECK_FAILED, EXIT_ENVIRONMENT, EXIT_OK, BadInput
from stackgate.output import console_err, styled
from validators.gate.cli_args import add_policy_arguments, policy_from, request_from
from validators.gate.compare import gate
from validators.gate.flow import candidate_side
from validators.records.cli_args import add_run_argument, add_store_argument
from validators.records.reference import Lookup
from validators.records.store import RecordStore
from validators.reporting.html import write_report

NAME = "report"
HELP = "write a self-contained HTML report of a record or run (vs a baseline when given)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("candidate", help="record file/id, run report file, or stack name")
    parser.add_argument("--baseline", default=None, help="STACK or RECORD to compare with")
    add_run_argument(parser, required=False)
    parser.add_argument("--env", type=FOLDER, default=None, help="env the runs judged")
    parser.add_argument("--out", type=OUTPUT_FILE, required=True, help="HTML file to write")
    add_policy_arguments(parser)
    add_store_argument(parser)


def run(args: argparse.Namespace) -> int:
    request = request_from(args)
    with RecordStore.open(args.store, read_only=True) as store:
        lookup = Lookup(store)
        # A report never runs validators itself: runs come as files, else it shows a record.
        if request.runs or request.candidate.kind == "file":
            record = candidate_side(request, lookup, runs=0)
        else:
            try:
                record = lookup.any_record(request.candidate)
            except BadInput as exc:
                raise BadInput(
                    exc.message,
                    details=[
                        *exc.details,
                        f"or report one run: {cli_command('run STACK --json')} > RESULT.json, "
                        f"then {cli_command('report RESULT.json --out report.html')}",
                    ],
                ) from None
        baseline = lookup.any_record(request.baseline) if request.baseline else None
    result = gate(baseline, record, policy_from(args)) if baseline else None
    path = write_report(args.out, record, baseline=baseline, gate_result=result)
    if args.json:
        emit_json(
            {
                "ok": True,
                "html": str(path),
                "record": record.label,
                "baseline": baseline.label if baseline else None,
                "passed": result.passed if result else None,
            }
        )
    console = console_err()
    if result is None:
        console.print(
            styled("[bold green]OK[/] {}", f"wrote {path}: {record.label}, no baseline compared")
        )
        return EXIT_OK
    if result.passed:
        not_here = f"; not decided here: {', '.join(result.not_proven_here)}"
        verdict = "[bold yellow]INCOMPLETE[/]" if result.not_proven_here else "[bold green]OK[/]"
        console.print(
            styled(
                verdict + " {}",
                f"wrote {path}: {record.label} vs {result.baseline}: the gate passes"
                + (not_here if result.not_proven_here else ""),
            )
        )
        return EXIT_ENVIRONMENT if result.not_proven_here else EXIT_OK
    for reason in result.reasons:
        console.print(f"  - {reason}", markup=False, highlight=False)
    console.print(
        styled(
            "[bold red]REFUSED[/] {}",
            f"wrote {path}: {record.label} vs {result.baseline}: the gate refuses, "
            f"{len(result.reasons)} reason(s) above",
        )
    )
    return EXIT_CHECK_FAILED
