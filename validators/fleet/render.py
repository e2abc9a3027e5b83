"""The fleet verdict as text: one row per node, then the host classes and their noise."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from validators.fleet.verdict import FleetVerdict, NodeVerdict

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


def render_verdict(verdict: FleetVerdict, console: Console) -> None:
    table = Table(title=f"fleet {verdict.fleet_id}: stack {verdict.stack}")
    for col in ("node", "verdict", "host class", "why / record"):
        table.add_column(col, overflow="fold")
    for node in verdict.nodes:
        label = "PASS (lemon)" if node.lemon else node.verdict
        style = "bold magenta" if node.lemon else _STYLE[node.verdict]
        table.add_row(
            node.node, Text(label, style=style), node.host_class or "-", node_detail(node)
        )
    console.print(table)
    for cls in verdict.classes:
        line = f"class {cls.name}: {len(cls.nodes)} node(s)"
        console.print(line + (f"; {cls.note}" if cls.note else ""), highlight=False)
        for n in cls.noise:
            console.print(
                f"  {n.metric}: median {n.median:g}, node spread {n.spread_pct:.2f}%, "
                f"run noise {n.within_pct:.2f}%, lemon beyond {n.threshold_pct:.2f}%",
                highlight=False,
            )
    c = verdict.counts
    console.print(
        f"{verdict.expected_nodes} node(s) expected: {c['PASS']} PASS ({c['LEMON']} lemon), "
        f"{c['FAIL']} FAIL, {c['MISSING']} MISSING",
        highlight=False,
    )
