"""Tiny inline-SVG charts for the HTML report: no JavaScript, no fonts, no network.

Two chart kinds: points with interval bars over categorical x (throughput vs concurrency),
and box plots of raw samples (TTFT/ITL per concurrency). Every text is escaped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

import numpy as np

from validators.gate.stats import resampled_means

WIDTH, HEIGHT = 640, 300
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 46, 50
COLORS = {"baseline": "#6b7280", "candidate": "#2563eb", "record": "#2563eb"}


@dataclass(frozen=True)
class Point:
    x: str
    mean: float
    low: float
    high: float


@dataclass(frozen=True)
class Box:
    x: str
    p5: float
    p25: float
    p50: float
    p75: float
    p95: float
    p99: float
    n: int


def box_of(x: str, samples: list[float]) -> Box:
    q = [
        float(v)
        for v in np.percentile(np.asarray(samples, dtype=np.float64), [5, 25, 50, 75, 95, 99])
    ]
    return Box(x, p5=q[0], p25=q[1], p50=q[2], p75=q[3], p95=q[4], p99=q[5], n=len(samples))


def mean_interval(samples: list[float], rng: np.random.Generator, level: float = 0.95) -> Point:
    """Mean with a percentile-bootstrap interval of the mean over runs (a single sample: a
    point, no bar)."""
    arr = np.asarray(samples, dtype=np.float64)
    if arr.size < 2:
        return Point("", float(arr.mean()), float(arr.mean()), float(arr.mean()))
    # The gate's resampling (validators.gate.stats), with fewer resamples: a chart's bar.
    means = resampled_means(arr[None, :], resamples=2000, rng=rng)[0]
    tail = (1 - level) / 2
    return Point(
        "", float(arr.mean()), float(np.quantile(means, tail)), float(np.quantile(means, 1 - tail))
    )


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    start = math.floor(low / step) * step
    ticks = []
    value = start
    while value <= high + step * 0.5:
        ticks.append(round(value, 10))
        value += step
    return ticks


def _fmt(value: float) -> str:
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.0f}"
    return f"{value:.3g}"


class _Frame:
    """Axes for categorical x and linear y from 0 (throughput) or from the data (latency)."""

    def __init__(self, xs: list[str], y_low: float, y_high: float, *, title: str, y_label: str):
        self.xs = xs
        self.ticks = nice_ticks(y_low, y_high)
        self.y0, self.y1 = self.ticks[0], self.ticks[-1]
        self.title = title
        self.y_label = y_label

    def px(self, index: float) -> float:
        span = WIDTH - LEFT - RIGHT
        return LEFT + span * (index + 0.5) / max(len(self.xs), 1)

    def py(self, value: float) -> float:
        span = HEIGHT - TOP - BOTTOM
        frac = (value - self.y0) / (self.y1 - self.y0) if self.y1 > self.y0 else 0.5
        return TOP + span * (1 - frac)

    def axes(self, x_label: str) -> list[str]:
        out = [f'<text x="{LEFT}" y="18" class="title">{escape(self.title)}</text>']
        for tick in self.ticks:
            y = self.py(tick)
            out.append(
                f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
            )
            out.append(
                f'<text x="{LEFT - 6}" y="{y + 4:.1f}" class="tick" '
                f'text-anchor="end">{_fmt(tick)}</text>'
            )
        for i, x in enumerate(self.xs):
            out.append(
                f'<text x="{self.px(i):.1f}" y="{HEIGHT - BOTTOM + 18}" class="tick" '
                f'text-anchor="middle">{escape(x)}</text>'
            )
        out.append(
            f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 8}" class="label" '
            f'text-anchor="middle">{escape(x_label)}</text>'
        )
        out.append(
            f'<text x="14" y="{(TOP + HEIGHT - BOTTOM) / 2}" class="label" '
            f'text-anchor="middle" transform="rotate(-90 14 '
            f'{(TOP + HEIGHT - BOTTOM) / 2})">{escape(self.y_label)}</text>'
        )
        out.append(
            f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" class="axis"/>'
        )
        return out


def _legend(sides: list[str]) -> list[str]:
    out = []
    for i, side in enumerate(sides):
        x = LEFT + i * 95
        out.append(f'<rect x="{x}" y="24" width="12" height="12" fill="{COLORS[side]}"/>')
        out.append(f'<text x="{x + 16}" y="34" class="tick">{escape(side)}</text>')
    return out


def _svg(body: list[str], label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(label)}">'
        + "".join(body)
        + "</svg>"
    )


def interval_chart(
    series: dict[str, list[Point]], *, title: str, y_label: str, x_label: str
) -> str:
    """Mean and interval per x for each side ('baseline', 'candidate'), joined by lines."""
    xs = list(dict.fromkeys(p.x for points in series.values() for p in points))
    values = [v for pts in series.values() for p in pts for v in (p.low, p.high)]
    frame = _Frame(xs, 0.0, max(values) * 1.08 if values else 1.0, title=title, y_label=y_label)
    body = frame.axes(x_label)
    offsets = {"baseline": -0.08, "candidate": 0.08}
    for side, points in series.items():
        color = COLORS[side]
        coords = [(frame.px(xs.index(p.x) + offsets.get(side, 0)), p) for p in points]
        if len(coords) > 1:
            path = " ".join(f"{x:.1f},{frame.py(p.mean):.1f}" for x, p in coords)
            body.append(
                f'<polyline points="{path}" fill="none" stroke="{color}" '
                'stroke-width="1.5" opacity="0.7"/>'
            )
        for x, p in coords:
            body.append(
                f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{frame.py(p.low):.1f}" '
                f'y2="{frame.py(p.high):.1f}" stroke="{color}" stroke-width="2"/>'
            )
            for y in (p.low, p.high):
                body.append(
                    f'<line x1="{x - 4:.1f}" x2="{x + 4:.1f}" y1="{frame.py(y):.1f}" '
                    f'y2="{frame.py(y):.1f}" stroke="{color}" stroke-width="2"/>'
                )
            body.append(
                f'<circle cx="{x:.1f}" cy="{frame.py(p.mean):.1f}" r="3.5" '
                f'fill="{color}"><title>{escape(side)} {escape(p.x)}: '
                f"{_fmt(p.mean)} [{_fmt(p.low)}, {_fmt(p.high)}]</title></circle>"
            )
    body += _legend(list(series))
    return _svg(body, title)


def box_chart(series: dict[str, list[Box]], *, title: str, y_label: str, x_label: str) -> str:
    """Box (p25-p75, median line), whiskers p5-p95, a dot at p99; sides next to each other."""
    xs = list(dict.fromkeys(b.x for boxes in series.values() for b in boxes))
    values = [v for bs in series.values() for b in bs for v in (b.p5, b.p99)]
    low = min(values) if values else 0.0
    frame = _Frame(
        xs, min(0.0, low), max(values) * 1.08 if values else 1.0, title=title, y_label=y_label
    )
    body = frame.axes(x_label)
    width = 0.28 * (WIDTH - LEFT - RIGHT) / max(len(xs), 1)
    offsets = {"baseline": -0.17, "candidate": 0.17} if len(series) > 1 else {}
    for side, boxes in series.items():
        color = COLORS[side]
        for b in boxes:
            cx = frame.px(xs.index(b.x) + offsets.get(side, 0))
            top, bottom = frame.py(b.p75), frame.py(b.p25)
            body.append(
                f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{frame.py(b.p95):.1f}" '
                f'y2="{frame.py(b.p5):.1f}" stroke="{color}"/>'
            )
            body.append(
                f'<rect x="{cx - width / 2:.1f}" y="{top:.1f}" width="{width:.1f}" '
                f'height="{max(bottom - top, 1):.1f}" fill="{color}" fill-opacity="0.25" '
                f'stroke="{color}"><title>{escape(side)} {escape(b.x)}: p50 '
                f"{_fmt(b.p50)}, p25-p75 {_fmt(b.p25)}-{_fmt(b.p75)}, p99 "
                f"{_fmt(b.p99)} (n={b.n})</title></rect>"
            )
            body.append(
                f'<line x1="{cx - width / 2:.1f}" x2="{cx + width / 2:.1f}" '
                f'y1="{frame.py(b.p50):.1f}" y2="{frame.py(b.p50):.1f}" '
                f'stroke="{color}" stroke-width="2"/>'
            )
            body.append(
                f'<circle cx="{cx:.1f}" cy="{frame.py(b.p99):.1f}" r="2.5" fill="{color}"/>'
            )
    body += _legend(list(series))
    return _svg(body, title)


def ratio_chart(
    points: list[tuple[Point, str]], *, tolerance: float, title: str, x_label: str
) -> str:
    """The gate's own quantity: candidate/baseline ratio (< 1 worse) with its interval per x,
    over the shaded no-change band [1 - tolerance, 1 + tolerance]. Colour is the verdict."""
    xs = [p.x for p, _ in points]
    values = [v for p, _ in points for v in (p.low, p.high)] + [1 - tolerance, 1 + tolerance]
    pad = (max(values) - min(values)) * 0.15 or 0.01
    frame = _Frame(xs, min(values) - pad, max(values) + pad, title=title, y_label="ratio")
    body = frame.axes(x_label)
    band_top, band_bottom = frame.py(1 + tolerance), frame.py(1 - tolerance)
    body.insert(
        1,
        f'<rect x="{LEFT}" y="{band_top:.1f}" width="{WIDTH - LEFT - RIGHT}" '
        f'height="{band_bottom - band_top:.1f}" fill="#f3f4f6"/>',
    )
    body.append(
        f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{frame.py(1.0):.1f}" '
        f'y2="{frame.py(1.0):.1f}" stroke="#9ca3af" stroke-dasharray="4 3"/>'
    )
    colors = {"REGRESSION": "#b91c1c", "IMPROVEMENT": "#15803d"}
    for i, (p, status) in enumerate(points):
        color = colors.get(status, "#374151")
        x = frame.px(i)
        body.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{frame.py(p.low):.1f}" '
            f'y2="{frame.py(p.high):.1f}" stroke="{color}" stroke-width="2"/>'
        )
        body.append(
            f'<circle cx="{x:.1f}" cy="{frame.py(p.mean):.1f}" r="3.5" fill="{color}">'
            f"<title>{escape(p.x)}: {p.mean:.3f} [{p.low:.3f}, {p.high:.3f}] "
            f"{escape(status)}</title></circle>"
        )
    return _svg(body, title)
