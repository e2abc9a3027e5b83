"""Rich tables for a gate verdict: every check, every metric, what changed, and why."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from stackgate.output import print_table, styled
from validators.gate.compare import METRIC_ORDER, GateResult, MetricVerdict
from validators.gate.diffs import Change

_CHECK_STYLE = {
    "OK": "green",
    "FAILED": "bold red",
    "NOT_RUN": "bold red",
    "NEW": "cyan",
    "SKIPPED": "yellow",
    "NOT_HERE": "yellow",
}
_METRIC_STYLE = {
    "REGRESSION": "bold red",
    "MISSING": "bold red",
    "TOO_FEW": "bold red",
    "INCOMPARABLE": "bold red",
    "IMPROVEMENT": "bold green",
    "SAME": "green",
    "INCONCLUSIVE": "bold yellow",
    "UNDERPOWERED": "bold yellow",
    "NEW": "cyan",
    "UNGATED": "dim",
}


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.1f}"
    return f"{value:.3g}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _change(m: MetricVerdict) -> str:
    return "-" if m.ratio is None else f"{(m.ratio - 1) * 100:+.1f}%"


def _interval(m: MetricVerdict) -> str:
    return "-" if m.low is None or m.high is None else f"[{m.low:.3f}, {m.high:.3f}]"


def checks_table(result: GateResult, *, show_ok: bool = True) -> Table:
    table = Table(title="checks", show_lines=False)
    for col in ("check", "baseline", "candidate", "verdict", "reason"):
        table.add_column(col, overflow="fold")
    rows = sorted(result.checks, key=lambda c: (not c.failing, c.status != "NEW", c.check))
    hidden = 0
    for c in rows:
        if not show_ok and c.status == "OK":
            hidden += 1
            continue
        style = _CHECK_STYLE[c.status]
        table.add_row(
            c.check,
            c.baseline or "-",
            c.candidate or "-",
            Text(c.status, style=style),
            c.reason[:160],
        )
    if hidden:
        table.caption = f"{hidden} more checks OK (--all shows them)"
    return table


def print_checks(console: Console, result: GateResult, *, show_ok: bool) -> None:
    if not show_ok and all(c.status == "OK" for c in result.checks):
        console.print(f"checks: all {len(result.checks)} OK")
        return
    print_table(console, checks_table(result, show_ok=show_ok))


def metrics_table(result: GateResult) -> Table:
    table = Table(
        title=f"metrics (ratio < 1 is worse; interval: each bound one-sided at "
        f"{result.policy['confidence']:.0%}, family-wise over the gated metrics)"
    )
    for col in (
        "metric",
        "better",
        "baseline",
        "candidate",
        "change",
        "interval",
        "tolerance",
        "detectable",
        "runs b/c",
        "verdict",
    ):
        table.add_column(col, justify="left" if col in ("metric", "verdict") else "right")
    for m in sorted(result.metrics, key=lambda m: (METRIC_ORDER[m.status], m.key)):
        style = _METRIC_STYLE[m.status]
        table.add_row(
            m.key,
            m.direction,
            _num(m.baseline_mean),
            _num(m.candidate_mean),
            _change(m),
            _interval(m),
            _pct(m.tolerance) if m.direction != "none" else "-",
            _pct(m.detectable),
            f"{m.n_baseline}/{m.n_candidate}",
            Text(m.status, style=style),
        )
    return table


def changes_table(title: str, changes: list[Change]) -> Table:
    table = Table(title=title)
    for col in ("key", "change", "baseline", "candidate"):
        table.add_column(col, overflow="fold")
    for c in changes:
        table.add_row(c.key, c.kind, c.a or "-", c.b or "-")
    return table


def host_table(result: GateResult) -> Table:
    table = Table(title="host differences")
    for col in ("field", "baseline", "candidate", "impact", "why"):
        table.add_column(col, overflow="fold")
    for h in result.host:
        style = {"blocks": "bold red", "performance": "yellow"}.get(h.impact, "dim")
        table.add_row(h.field, h.baseline, h.candidate, Text(h.impact, style=style), h.why)
    return table


def render_gate(console: Console, result: GateResult, *, show_ok_checks: bool = True) -> None:
    console.print(
        styled("[bold]gate[/] candidate {} vs baseline {}", result.candidate, result.baseline)
    )
    if result.baseline_numbers != "record":
        console.print(f"baseline numbers: {result.baseline_numbers}")
    if result.versions_unknown:
        console.print(result.versions_unknown, markup=False, highlight=False)
    if result.versions:
        print_table(console, changes_table("package versions", result.versions))
    if result.env:
        print_table(console, changes_table("environment variables", result.env))
    if result.manifest:
        print_table(console, changes_table("manifest", result.manifest))
    if result.host:
        print_table(console, host_table(result))
        if any(h.impact != "info" for h in result.host):
            console.print(
                styled(
                    "[yellow]note:[/] the hosts differ in ways that change performance; "
                    "metric ratios compare different machines"
                )
            )
    print_checks(console, result, show_ok=show_ok_checks)
    if result.metrics:
        print_table(console, metrics_table(result))
    if not result.passed:
        # the reasons, then the notes beside the verdict, then the verdict: the last line
        for reason in result.reasons:
            console.print(f"  - {reason}", markup=False, highlight=False)
    if result.underpowered:
        console.print(
            styled(
                "[yellow]note:[/] {}",
                f"at their measured noise, {len(result.underpowered)} metric(s) "
                "could hide the target regression (see 'detectable'); add runs on both sides: "
                + ", ".join(result.underpowered[:5])
                + (" ..." if len(result.underpowered) > 5 else ""),
            ),
            highlight=False,
        )
    if result.not_proven_here:
        console.print(
            styled(
                "[yellow]note:[/] {}",
                f"{len(result.not_proven_here)} check(s) the record passed cannot run on this "
                "host (the record's env skipped them here too); this verdict does not cover "
                "them: " + ", ".join(result.not_proven_here),
            ),
            highlight=False,
        )
    if result.passed and result.not_proven_here:
        # What the record proved and this host cannot run is not decided: not an OK.
        console.print(
            styled(
                "[bold yellow]INCOMPLETE[/] {}",
                "gate PASSED on this host only: no failed check, no regression beyond noise; "
                f"not decided here: {', '.join(result.not_proven_here)}",
            )
        )
        return
    if result.passed:
        console.print(
            styled("[bold green]OK[/] gate PASSED: no failed check, no regression beyond noise")
        )
        return
    if result.verdict in ("INCONCLUSIVE", "UNDERPOWERED"):
        keys = result.inconclusive if result.verdict == "INCONCLUSIVE" else result.underpowered
        why = (
            "looks worse, but within what noise gives an equal candidate at the family goal"
            if result.verdict == "INCONCLUSIVE"
            else "within noise, but the noise hides the target regression at these runs"
        )
        console.print(
            styled("[bold yellow]{}[/]: {} ({})", result.verdict, why, ", ".join(keys[:5])),
            highlight=False,
        )
        return
    console.print(styled("[bold red]REFUSED[/]: {} reason(s) above", len(result.reasons)))
