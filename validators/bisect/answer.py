"""The bisect's answer three ways: the JSON payload, the table on stderr, an HTML page."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from stackgate.credentials import redact
from stackgate.files import atomic_write_text
from stackgate.output import styled
from validators.bisect.session import Bisect
from validators.bisect.steps import Step
from validators.bisect.units import ChangeUnit


def unit_json(unit: ChangeUnit) -> dict[str, Any]:
    return {
        "id": unit.id,
        "label": unit.label,
        "dists": [d.model_dump() for d in unit.dists],
        "manifest": [m.model_dump(mode="json") for m in unit.manifest],
        "merged_because": unit.merged_because,
    }


def step_json(step: Step, cached: bool) -> dict[str, Any]:
    return {**step.model_dump(mode="json"), "regressed": step.regressed, "from_state": cached}


def payload(
    bisect: Bisect, status: str, culprits: list[tuple[list[ChangeUnit], float]], search: str
) -> dict[str, Any]:
    s = bisect.settings
    return {
        "ok": status == "culprits",
        "status": status,
        "baseline": bisect.baseline.label,
        "candidate": bisect.sides.cand.manifest.name,
        "search": search,
        "culprits": [[unit_json(u) for u in group] for group, _ in culprits],
        # the search's posterior of each located culprit under the gate's noise model
        "confidence": [round(c, 4) for _, c in culprits],
        "units": [unit_json(u) for u in bisect.units],
        "steps": [step_json(step, cached) for step, cached in bisect.steps],
        "counts": vars(bisect.counts),
        "policy": {
            "tolerance": s.policy.tolerance,
            "tail_tolerance": s.policy.tail_tolerance,
            "confidence": s.policy.confidence,
            "min_repeats": s.policy.min_repeats,
            "repeats": s.repeats,
            "interleave": s.interleave,
            "metrics": list(s.metrics),
        },
        "work": str(s.work),
    }


def _numbers(step: Step) -> str:
    parts = []
    for m in step.metrics[:3]:
        if m.ratio is not None and m.low is not None and m.high is not None:
            parts.append(f"{m.key} {m.ratio:.3f} [{m.low:.3f}, {m.high:.3f}] {m.status}")
        else:
            parts.append(f"{m.key} {m.status}")
    if not parts and step.reasons:
        parts.append(step.reasons[0])
    more = len(step.metrics) - 3
    return "; ".join(parts) + (f"; +{more} more" if more > 0 else "")


def render_text(console: Console, data: dict[str, Any], bisect: Bisect) -> None:
    units = Table(title="change units", title_justify="left")
    for col in ("unit", "change", "merged because"):
        units.add_column(col, overflow="fold")
    for unit in bisect.units:
        units.add_row(unit.id, unit.label, unit.merged_because or "")
    console.print(units)
    steps = Table(title="steps", title_justify="left")
    for col in ("#", "units applied", "verdict", "numbers", "from"):
        steps.add_column(col, overflow="fold")
    for i, (step, cached) in enumerate(bisect.steps, start=1):
        source = "state file" if cached else ("static --lock" if step.env is None else "gate")
        source = "refused gate" if step.refused_gate else source
        steps.add_row(str(i), "+".join(step.applied), step.verdict, _numbers(step), source)
    console.print(steps)
    c = data["counts"]
    spent = (
        f"{c['locks']} locks, {c['builds']} builds ({c['builds_reused']} reused), "
        f"{c['gates']} gates, {c['before_install']} refused before install, "
        f"{c['cached']} steps from the state file"
    )
    if data["status"] == "culprits":
        names = "; ".join(
            " together with ".join(f"{u['id']} ({u['label']})" for u in group)
            + f" ({100 * confidence:.1f}% likely)"
            for group, confidence in zip(data["culprits"], data["confidence"], strict=True)
        )
        console.print(styled("[bold red]OK[/] culprit(s): {}", f"{names} [{spent}]"))
    elif data["status"] == "no-regression":
        console.print(
            styled(
                "[bold]FAILED[/] {}",
                f"nothing to bisect: the whole candidate did not regress on this host [{spent}]",
            )
        )
    else:
        console.print(
            styled(
                "[bold]FAILED[/] {}",
                f"budget spent before a culprit was named; run again with a larger budget to "
                f"continue from {data['work']} [{spent}]",
            )
        )


def _when(step: dict[str, Any]) -> str:
    if step["refused_gate"]:
        return "the refused gate: " + html.escape(str(step["refused_gate"]))
    return "state file" if step["from_state"] else html.escape(str(step["seconds"])) + " s"


def write_html(path: Path, data: dict[str, Any]) -> None:
    e = html.escape
    rows = []
    for i, step in enumerate(data["steps"], start=1):
        numbers = "<br>".join(
            e(f"{m['key']}: {m['status']}" + (f" {m['ratio']:.3f} [{m['low']:.3f}, {m['high']:.3f}]"
              if m["ratio"] is not None and m["low"] is not None and m["high"] is not None else ""))
            for m in step["metrics"]
        )  # fmt: skip
        reasons = "<br>".join(e(r) for r in step["reasons"])
        rows.append(
            f"<tr class='{e(step['verdict'].lower())}'><td>{i}</td>"
            f"<td>{e('+'.join(step['applied']))}</td><td>{e(step['verdict'])}</td>"
            f"<td>{numbers}</td><td>{reasons}</td><td>{e(step['stack'])}<br>"
            f"lock {e(step['lock_sha256'][:12])}</td>"
            f"<td>{_when(step)}</td></tr>"
        )
    units = "".join(
        f"<tr><td>{e(u['id'])}</td><td>{e(u['label'])}</td><td>{e(u['merged_because'] or '')}</td></tr>"
        for u in data["units"]
    )
    culprits = "".join(
        "<li>" + " together with ".join(e(f"{u['id']}: {u['label']}") for u in group) + "</li>"
        for group in data["culprits"]
    )
    counts = ", ".join(f"{e(k)}: {v}" for k, v in data["counts"].items())
    page = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>bisect {e(data["candidate"])}</title>
<style>body{{font-family:sans-serif}}table{{border-collapse:collapse}}td,th{{border:1px solid #999;
padding:3px 6px;vertical-align:top}}tr.regressed td,tr.fail_before_install td{{background:#fdd}}
tr.same td{{background:#dfd}}</style></head><body>
<h1>bisect: {e(data["baseline"])} &rarr; {e(data["candidate"])}</h1>
<p>status: <b>{e(data["status"])}</b>; search: {e(data["search"])}; {counts}</p>
<h2>culprits</h2><ul>{culprits or "<li>none named</li>"}</ul>
<h2>steps</h2><table><tr><th>#</th><th>units applied</th><th>verdict</th><th>numbers</th>
<th>reasons</th><th>stack</th><th>time</th></tr>{"".join(rows)}</table>
<h2>change units</h2><table><tr><th>unit</th><th>change</th><th>merged because</th></tr>{units}</table>
</body></html>
"""
    atomic_write_text(path, redact(page))
