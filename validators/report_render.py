"""Render a Report (or a list of Results) as a rich table on stderr."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from validators.results import Report, Result

STYLE = {"PASS": "green", "FAIL": "bold red", "SKIP": "yellow", "ERROR": "bold magenta"}


def results_table(results: Sequence[Result], title: str) -> Table:
    table = Table(title=title, show_lines=False, expand=True)
    table.add_column("status", no_wrap=True)
    table.add_column("check", no_wrap=True, overflow="fold")
    table.add_column("reason", overflow="fold", ratio=1)
    table.add_column("s", justify="right", no_wrap=True)
    for r in results:
        table.add_row(f"[{STYLE[r.status]}]{r.status}[/]", r.check, r.reason, f"{r.duration_s:.2f}")
    return table


def render(report: Report, console: Console) -> None:
    counts = report.counts()
    console.print(results_table(report.results, f"stackgate validate {report.stack}"))
    for group, why in report.groups_skipped.items():
        console.print(f"[yellow]{group}[/]: {why}", highlight=False)
    verdict = "[bold red]FAILED[/]" if report.failed else "[bold green]OK[/]"
    console.print(
        f"{verdict}  {counts['PASS']} passed, {counts['FAIL']} failed, {counts['ERROR']} errors, "
        f"{counts['SKIP']} skipped in {report.duration_s:.1f} s",
        highlight=False,
    )


def render_results(results: Sequence[Result], title: str, console: Console) -> None:
    console.print(results_table(results, title))
