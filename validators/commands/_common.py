"""Shared pieces of the validator commands: exit codes from results, report output."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

from stackgate.cli import emit_json
from stackgate.credentials import redact
from stackgate.errors import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_ENVIRONMENT, EXIT_OK, BadInput
from stackgate.files import atomic_write_text
from stackgate.output import console_err
from validators.core.results import Report, Result, to_junit
from validators.core.undecided import undecided
from validators.reporting.table import render, render_results

# An ERROR in these checks means the input (the --env path) is wrong, not the host.
BAD_INPUT_CHECKS = {"static.env", "runtime.env", "static.lock.wheels"}


def exit_code(results: Sequence[Result], incomplete: str | None = None) -> int:
    """1 on a FAIL, 2 or 3 on an ERROR (bad input or the host), 3 when what decides the
    verdict was skipped (`incomplete`: INCOMPLETE, the host lacks what the question needs), 0
    otherwise."""
    if any(r.status == "FAIL" for r in results):
        return EXIT_CHECK_FAILED
    errors = [r for r in results if r.status == "ERROR"]
    if any(r.check in BAD_INPUT_CHECKS for r in errors):
        return EXIT_BAD_INPUT
    return EXIT_ENVIRONMENT if errors or incomplete else EXIT_OK


def env_path(value: str | None) -> Path | None:
    if value is None:
        return None
    path = Path(value)
    if not path.exists():
        raise BadInput(f"--env {value}: no such directory")
    return path


def finish_report(report: Report, args: argparse.Namespace) -> int:
    if getattr(args, "junit", None):
        atomic_write_text(Path(args.junit), redact(to_junit(report)))
    if args.json:
        emit_json(report.model_dump(mode="json"))
    incomplete = undecided(report.results)
    render(report, console_err(), incomplete)
    return exit_code(report.results, incomplete)


def finish_results(
    results: Sequence[Result],
    title: str,
    args: argparse.Namespace,
    started: float | None = None,
    incomplete: str | None = None,
) -> int:
    """JSON on stdout when asked; the table (failures first) and one verdict line on stderr
    (INCOMPLETE instead of OK when `incomplete` says why the deciding checks were skipped)."""
    seconds = time.monotonic() - started if started is not None else None
    incomplete = incomplete or undecided(results)
    if args.json:
        payload: dict[str, object] = {
            "schema_version": 1,
            "results": [r.model_dump(mode="json") for r in results],
        }
        if incomplete:
            payload["incomplete"] = incomplete
        emit_json(payload)
    render_results(results, title, console_err(), seconds, incomplete)
    return exit_code(results, incomplete)
