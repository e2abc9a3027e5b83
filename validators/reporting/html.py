"""A self-contained HTML report of a record, optionally against a baseline with a gate verdict.

One file, inline CSS and SVG, no scripts and no external URL, so it opens offline and in
mail/CI artifact viewers. Sections: verdict, what was tested, checks, metrics with
intervals, throughput vs concurrency (candidate vs baseline, 95% intervals of the mean over
runs), TTFT/ITL distributions per concurrency (box plots of the raw per-request samples).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from markupsafe import Markup

from stackgate.credentials import redact
from stackgate.files import atomic_write_text
from validators.gate.compare import METRIC_ORDER, GateResult
from validators.records.metrics import parse_metric_key
from validators.records.model import Record
from validators.reporting.svg import (
    Box,
    Point,
    box_chart,
    box_of,
    interval_chart,
    mean_interval,
    ratio_chart,
)
from validators.templates import html_template

_THROUGHPUT_NAMES = ("output_throughput", "total_throughput", "request_throughput")
_DISTRIBUTIONS = (("ttft_ms", "TTFT (ms)"), ("itl_ms", "ITL (ms)"))


@dataclass(frozen=True)
class Cell:
    text: str
    kind: Literal["", "num", "status"] = ""


Table = tuple[list[str], list[list[Cell]]]


def _td(value: object, kind: Literal["", "num"] = "") -> Cell:
    return Cell(str(value), kind)


def _status(value: str | None) -> Cell:
    return Cell(value or "-", "status")


def _num(value: float | None) -> str:
    return "-" if value is None else (f"{value:,.1f}" if abs(value) >= 100 else f"{value:.4g}")


def _summary(record: Record, baseline: Record | None) -> Table:
    rows: list[list[Cell]] = []

    def row(label: str, cand: object, base: object | None = None) -> None:
        cells = [_td(label), _td(cand if cand is not None else "-")]
        if baseline is not None:
            cells.append(_td(base if base is not None else "-"))
        rows.append(cells)

    b = baseline
    row("run" if record.kind == "candidate" else "record", record.label, b.label if b else None)
    row("created", record.created_at, b.created_at if b else None)
    row("env tree sha256", record.build.env_tree_sha256, b.build.env_tree_sha256 if b else None)
    row("lock sha256", record.build.lock_sha256, b.build.lock_sha256 if b else None)
    gpu = f"{record.host.gpu.count} x {record.host.gpu.model or 'no GPU'}"
    base_gpu = f"{b.host.gpu.count} x {b.host.gpu.model or 'no GPU'}" if b else None
    row("GPUs", gpu, base_gpu)
    row(
        "driver / CUDA",
        f"{record.host.driver or '-'} / {record.host.cuda_driver or '-'}",
        f"{b.host.driver or '-'} / {b.host.cuda_driver or '-'}" if b else None,
    )
    row("interconnect", record.host.interconnect, b.host.interconnect if b else None)
    row("runs", record.runs, b.runs if b else None)
    what = "run" if record.kind == "candidate" else "known-good record"
    headers = ["", "candidate" if b else what] + (["baseline"] if b else [])
    return headers, rows


def _checks(record: Record, gate_result: GateResult | None) -> Table:
    if gate_result is not None:
        rows = [
            [_td(c.check), _status(c.baseline), _status(c.candidate), _status(c.status),
             _td(c.reason[:300])]
            for c in sorted(gate_result.checks, key=lambda c: (not c.failing, c.check))
        ]  # fmt: skip
        return ["check", "baseline", "candidate", "verdict", "reason"], rows
    rows = [
        [_td(r.check), _td(r.group), _status(r.status), _td(r.reason[:300])]
        for r in sorted(record.checks, key=lambda r: (r.status == "PASS", r.check))
    ]
    return ["check", "group", "status", "reason"], rows


def _metrics(gate_result: GateResult | None, record: Record) -> Table:
    if gate_result is None:
        rows = [
            [_td(k), _td(_num(float(np.mean(v))), "num"), _td(len(v), "num")]
            for k, v in sorted(record.metrics.items())
        ]
        return ["metric", "mean", "runs"], rows
    rows = []
    for m in sorted(gate_result.metrics, key=lambda m: (METRIC_ORDER[m.status], m.key)):
        change = "-" if m.ratio is None else f"{(m.ratio - 1) * 100:+.1f}%"
        interval = "-" if m.low is None else f"[{m.low:.3f}, {m.high:.3f}]"
        tolerance = f"{m.tolerance:.1%}" if m.direction != "none" else "-"
        rows.append(
            [_td(m.key), _td(m.direction), _td(_num(m.baseline_mean), "num"),
             _td(_num(m.candidate_mean), "num"), _td(change, "num"), _td(interval, "num"),
             _td(tolerance, "num"), _td(f"{m.n_baseline}/{m.n_candidate}", "num"),
             _status(m.status)]
        )  # fmt: skip
    return (
        [
            "metric",
            "better",
            "baseline",
            "candidate",
            "change",
            "interval (ratio)",
            "tolerance",
            "runs b/c",
            "verdict",
        ],
        rows,
    )


def _sides(record: Record, baseline: Record | None) -> dict[str, Record]:
    # A lone record is not a candidate of anything: it is named as what it is.
    return {"baseline": baseline, "candidate": record} if baseline else {"record": record}


def _throughput_charts(sides: dict[str, Record], rng: np.random.Generator) -> list[str]:
    charts = []
    keys = {k for r in sides.values() for k in r.metrics}
    series_names = sorted(
        {
            parse_metric_key(k).series
            for k in keys
            if parse_metric_key(k).concurrency is not None
            and parse_metric_key(k).name in _THROUGHPUT_NAMES
        }
    )
    for series in series_names:
        data: dict[str, list[Point]] = {}
        for side, rec in sides.items():
            pts = []
            for key, samples in rec.metrics.items():
                parsed = parse_metric_key(key)
                if parsed.series == series and parsed.concurrency is not None and samples:
                    p = mean_interval(samples, rng)
                    pts.append(
                        (parsed.concurrency, Point(str(parsed.concurrency), p.mean, p.low, p.high))
                    )
            data[side] = [p for _, p in sorted(pts, key=lambda t: t[0])]
        if any(data.values()):
            name = series.split("/")[-1]
            levels = {p.x for pts in data.values() for p in pts}
            # One level is a point, not a curve over concurrency: say which level it is.
            at = f" at concurrency {next(iter(levels))}" if len(levels) == 1 else ""
            charts.append(
                interval_chart(
                    data,
                    title=f"{name}{at}: mean and 95% interval over runs",
                    y_label=f"{name} (tok/s)" if "output" in name or "total" in name else name,
                    x_label="concurrency",
                )
            )
    return charts


def _ratio_charts(gate_result: GateResult) -> list[str]:
    by_series: dict[str, list[tuple[int, Point, str]]] = {}
    tolerance: dict[str, float] = {}
    for m in gate_result.metrics:
        parsed = parse_metric_key(m.key)
        if (
            parsed.concurrency is None
            or parsed.name not in _THROUGHPUT_NAMES
            or m.ratio is None
            or m.low is None
            or m.high is None
        ):
            continue
        point = Point(str(parsed.concurrency), m.ratio, m.low, m.high)
        by_series.setdefault(parsed.series, []).append((parsed.concurrency, point, m.status))
        tolerance[parsed.series] = m.tolerance
    return [
        ratio_chart(
            [(p, s) for _, p, s in sorted(points, key=lambda t: t[0])],
            tolerance=tolerance[series],
            title=f"{series.split('/')[-1]}: candidate/baseline ratio (grey band: tolerance)",
            x_label="concurrency",
        )
        for series, points in sorted(by_series.items())
    ]


def _distribution_charts(sides: dict[str, Record]) -> list[str]:
    charts = []
    for family, label in _DISTRIBUTIONS:
        data: dict[str, list[Box]] = {}
        for side, rec in sides.items():
            boxes = []
            for key, samples in rec.distributions.items():
                parsed = parse_metric_key(key)
                if parsed.name == family and samples:
                    conc = parsed.concurrency
                    boxes.append((conc or 0, box_of(str(conc) if conc else "-", samples)))
            data[side] = [b for _, b in sorted(boxes, key=lambda t: t[0])]
        if any(data.values()):
            charts.append(
                box_chart(
                    data,
                    title=f"{label} per request: p5-p95 whiskers, p25-p75 box, p99 dot",
                    y_label=label,
                    x_label="concurrency",
                )
            )
    return charts


def _quantile_charts(sides: dict[str, Record]) -> list[str]:
    """Without raw samples: the run's own quantiles (median to p99) per concurrency, as bench
    reports them (validators/serve keeps median_/p99_ fields per level)."""
    charts = []
    for family, label in (("ttft_ms", "TTFT (ms)"), ("itl_ms", "ITL (ms)")):
        data: dict[str, list[Point]] = {}
        for side, rec in sides.items():
            pts: dict[int, dict[str, float]] = {}
            for key, samples in rec.metrics.items():
                parsed = parse_metric_key(key)
                for q in ("median", "p99"):
                    if parsed.name == f"{q}_{family}" and parsed.concurrency and samples:
                        pts.setdefault(parsed.concurrency, {})[q] = float(np.mean(samples))
            data[side] = [
                Point(str(c), v["median"], v["median"], v["p99"])
                for c, v in sorted(pts.items())
                if "median" in v and "p99" in v
            ]
        if any(data.values()):
            charts.append(
                interval_chart(
                    data,
                    title=f"{label}: median (dot) to p99 (bar end), mean over runs",
                    y_label=label,
                    x_label="concurrency",
                )
            )
    return charts


def render_report(
    record: Record, *, baseline: Record | None = None, gate_result: GateResult | None = None
) -> str:
    seed_text = record.record_id + (baseline.record_id if baseline else "")
    rng = np.random.default_rng(int(hashlib.sha256(seed_text.encode()).hexdigest()[:16], 16))
    sides = _sides(record, baseline)
    versions: Table | None = None
    if gate_result is not None and gate_result.versions:
        versions = (
            ["package", "change", "baseline", "candidate"],
            [[_td(c.key), _td(c.kind), _td(c.a or "-"), _td(c.b or "-")]
             for c in gate_result.versions],
        )  # fmt: skip
    charts = _throughput_charts(sides, rng)
    if gate_result is not None:
        charts += _ratio_charts(gate_result)
    has_metrics = bool(record.metrics or (baseline and baseline.metrics))
    if gate_result is not None:
        here = " on this host" if gate_result.not_proven_here else ""
        banner = ("pass", f"PASSED{here}") if gate_result.passed else ("fail", gate_result.verdict)
    else:  # no gate: the checks' own verdict
        bad = [c.check for c in record.checks if c.status in ("FAIL", "ERROR")]
        passed = sum(1 for c in record.checks if c.status == "PASS")
        # A lone record passed nothing against anything: no green "PASSED" verdict.
        banner = (
            ("fail", f"FAILED: {len(bad)} check(s)")
            if bad
            else (
                "info",
                f"{record.kind} record: {passed} of {len(record.checks)} checks passed; "
                "no baseline compared",
            )
        )
    return html_template("report.html.j2").render(
        title=f"stackgate: {record.label}" + (f" vs {baseline.label}" if baseline else ""),
        stack=record.stack,
        runs=record.runs,
        banner=banner,
        reasons=gate_result.reasons if gate_result is not None else [],
        summary=_summary(record, baseline),
        versions=versions,
        versions_unknown=gate_result.versions_unknown if gate_result is not None else None,
        checks=_checks(record, gate_result),
        metrics=_metrics(gate_result, record) if has_metrics else None,
        underpowered=gate_result.underpowered if gate_result is not None else [],
        not_proven_here=gate_result.not_proven_here if gate_result is not None else [],
        # Our own SVG (reporting.svg escapes every text it writes): markup, not text.
        charts=[Markup(c) for c in charts],
        dists=[Markup(c) for c in _distribution_charts(sides) or _quantile_charts(sides)],
    )


def write_report(
    path: Path,
    record: Record,
    *,
    baseline: Record | None = None,
    gate_result: GateResult | None = None,
) -> Path:
    # Atomic: an interrupted write leaves the previous report or none, never half of one.
    page = render_report(record, baseline=baseline, gate_result=gate_result)
    atomic_write_text(path, redact(page))
    return path
