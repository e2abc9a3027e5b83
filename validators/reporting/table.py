"""Render a Report (or a list of Results) as a rich table on stderr, failures first, and end
with one verdict line. Text from results is never parsed as markup (stackgate.output)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from stackgate.output import print_table, styled
from validators.core.results import Report, Result

STYLE = {"PASS": "green", "FAIL": "bold red", "SKIP": "yellow", "ERROR": "bold magenta"}
ORDER = {"FAIL": 0, "ERROR": 1, "SKIP": 2, "PASS": 3}


def failures_first(results: Sequence[Result]) -> list[Result]:
    """FAIL, then ERROR, SKIP, PASS; the validators' order within each."""
    return sorted(results, key=lambda r: ORDER.get(r.status, 4))


def results_table(results: Sequence[Result], title: str, console: Console) -> Table:
    """On a terminal: status, check, reason (the flexible column), seconds. Piped: the reason
    last, so that print_table's lines end where each reason does."""
    terminal = console.is_terminal
    table = Table(title=title, show_lines=False, expand=terminal)
    table.add_column("status", no_wrap=True)
    if not terminal:
        table.add_column("s", justify="right", no_wrap=True)
    table.add_column("check", no_wrap=True, overflow="fold")
    table.add_column("reason", overflow="fold", ratio=1 if terminal else None)
    if terminal:
        table.add_column("s", justify="right", no_wrap=True)
    for r in failures_first(results):
        seconds = f"{r.duration_s:.2f}" if r.duration_s else "-"
        status = Text(r.status, style=STYLE[r.status])
        if terminal:
            table.add_row(status, r.check, r.reason, seconds)
        else:
            table.add_row(status, seconds, r.check, r.reason)
    return table


def counts_of(results: Sequence[Result]) -> Mapping[str, int]:
    return {s: sum(1 for r in results if r.status == s) for s in ORDER}


def verdict_line(
    results: Sequence[Result], what: str, seconds: float | None, incomplete: str | None = None
) -> Text:
    """One line: FAILED/OK, what was checked, the counts and the time. `incomplete` (why the
    checks that decide the question were skipped) turns an OK into INCOMPLETE: "OK preflight
    cu130 ... 4 skipped" on a host without a GPU read as "this host can run cu130"."""
    counts = counts_of(results)
    failed = counts["FAIL"] or counts["ERROR"]
    if failed:
        verdict = "[bold red]FAILED[/]"
    elif incomplete:
        verdict = "[bold yellow]INCOMPLETE[/]"
    else:
        verdict = "[bold green]OK[/]"
    took = f" in {seconds:.1f} s" if seconds is not None else ""
    why = f" ({incomplete})" if incomplete and not failed else ""
    return styled(
        verdict + " {}",
        f"{what}: {len(results)} checks, {counts['PASS']} passed, {counts['FAIL']} failed, "
        f"{counts['ERROR']} errors, {counts['SKIP']} skipped{took}{why}",
    )


def render(report: Report, console: Console, incomplete: str | None = None) -> None:
    print_table(
        console, results_table(report.results, f"stackgate validate {report.stack}", console)
    )
    for group, why in report.groups_skipped.items():
        console.print(styled("[yellow]{}[/]: {}", group, why))
    console.print(
        verdict_line(report.results, report.stack or "run", report.duration_s, incomplete)
    )


def render_results(
    results: Sequence[Result],
    title: str,
    console: Console,
    seconds: float | None = None,
    incomplete: str | None = None,
) -> None:
    print_table(console, results_table(results, title, console))
    console.print(verdict_line(results, title, seconds, incomplete))
