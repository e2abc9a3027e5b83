"""The fleet verdict for people: a table on stderr, and one self-contained HTML page.

Styles come from rich `Text` objects, never from markup in strings (every console has markup
off, stackgate.output), so a node name or a reason is printed as it is.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from stackgate.credentials import redact
from stackgate.files import atomic_write_text
from stackgate.output import styled
from validators.fleet.verdict import FleetVerdict, NodeVerdict
from validators.templates import html_template

_STYLE = {"PASS": "green", "FAIL": "bold red", "MISSING": "yellow"}


def node_detail(node: NodeVerdict) -> str:
    if node.lemon:
        return "lemon: " + "; ".join(
            f"{m.metric} {m.worse_by_pct:+.1f}% worse than the class median {m.class_median:g} "
            f"(threshold {m.threshold_pct:.1f}%)"
            for m in node.lemon
        )
    if node.verdict == "PASS":
        return f"record {node.record_id[:12] if node.record_id else '-'}"
    parts = [f"{node.phase}:"] if node.phase else []
    checks = [f"{c.check} {c.status} ({c.runs} run(s)): {c.reason}" for c in node.failed_checks]
    parts.extend(checks[:3] or node.reasons[:3])
    if not node.expected:
        parts.append("(not in the node set)")
    return " ".join(parts)


def label(node: NodeVerdict) -> str:
    return "PASS (lemon)" if node.lemon else node.verdict


# Up to this many nodes the table lists every node; a larger fleet's table lists the nodes
# that need a look (FAIL, MISSING, lemons) and counts the rest: verdict.json and verdict.html
# list every node (a large fleet's rows cost seconds of CPU on a terminal; nobody reads them).
TABLE_ALL_UP_TO = 200


def render_verdict(verdict: FleetVerdict, console: Console) -> None:
    table = Table(title=f"fleet {verdict.fleet_id}: stack {verdict.stack}")
    for col in ("node", "verdict", "host class", "why / record"):
        table.add_column(col, overflow="fold")
    shown = verdict.nodes
    if len(shown) > TABLE_ALL_UP_TO:
        shown = [n for n in verdict.nodes if n.verdict != "PASS" or n.lemon]
    for node in shown:
        style = "bold magenta" if node.lemon else _STYLE[node.verdict]
        table.add_row(
            Text(node.node),
            Text(label(node), style=style),
            Text(node.host_class or "-"),
            Text(node_detail(node)),
        )
    console.print(table)
    if len(shown) < len(verdict.nodes):
        console.print(
            f"{len(verdict.nodes) - len(shown)} PASS node(s) not listed above "
            "(verdict.json and verdict.html list every node)",
            highlight=False,
        )
    for cls in verdict.classes:
        line = f"class {cls.name}: {len(cls.nodes)} node(s)"
        console.print(line + (f"; {cls.note}" if cls.note else ""), highlight=False)
        for n in cls.noise:
            console.print(
                f"  {n.metric}: median {n.median:g}, node spread {n.spread_pct:.2f}%, "
                f"run noise {n.within_pct:.2f}%, lemon beyond {n.threshold_pct:.2f}%",
                highlight=False,
            )
    for env in verdict.envs:
        if env.differing:
            console.print(
                f"env of lock {str(env.lock_sha256)[:12]}: {len(env.differing)} node(s) differ "
                f"from the majority tree {str(env.majority_tree)[:16]}: "
                + ", ".join(env.differing),
                highlight=False,
            )
    c = verdict.counts
    console.print(
        styled(
            ("[bold green]OK[/]" if verdict.ok else "[bold red]FAILED[/]") + " {}",
            f"{verdict.expected_nodes} node(s) expected: {c['PASS']} PASS ({c['LEMON']} lemon), "
            f"{c['FAIL']} FAIL, {c['MISSING']} MISSING",
        )
    )


def render_html(verdict: FleetVerdict) -> str:
    """One page: counts, failures with reasons, lemons, nodes by host class, env hashes."""
    by = {n.node: n for n in verdict.nodes}
    return html_template("fleet_verdict.html.j2").render(
        v=verdict,
        failed=[n for n in verdict.nodes if n.verdict != "PASS"],
        lemons=[n for n in verdict.nodes if n.lemon],
        classes=[(c, [by[n] for n in c.nodes if n in by]) for c in verdict.classes],
        detail=node_detail,
        label=label,
    )


def write_html(path: Path, verdict: FleetVerdict) -> Path:
    atomic_write_text(path, redact(render_html(verdict)))
    return path
