"""NCCL small all-reduce latency: decode-sized tensors, the stack's profile vs NCCL defaults.

Decode all-reduces carry hidden x bf16 x tokens bytes (Kimi-K2.5: hidden 7168, 61 layers, two
all-reduces per layer: after attention and after the MoE block), so one token is 14 KB and a
128-token decode batch 1.8 MB; larger sizes up to 64 MB show where a profile trades latency
for bandwidth. Cost per decode step = 2 x layers x p50 at the single-stream size.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

KIMI_K25_HIDDEN = 7168
KIMI_K25_LAYERS = 61
ALLREDUCES_PER_LAYER = 2
BF16_BYTES = 2
DECODE_TOKENS = (1, 2, 3, 4, 8, 16, 32, 64, 128)
LARGE_BYTES = (4 << 20, 16 << 20, 64 << 20)


def message_sizes(hidden: int = KIMI_K25_HIDDEN) -> list[int]:
    return sorted({hidden * BF16_BYTES * t for t in DECODE_TOKENS} | set(LARGE_BYTES))


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank-interpolated percentile (q in 0..100) without numpy in the hot path."""
    if not values:
        raise ValueError("no samples")
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass(frozen=True)
class SizeStats:
    bytes: int
    p50_us: float
    p90_us: float
    mean_us: float
    samples: int
    correct: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "bytes": self.bytes,
            "p50_us": round(self.p50_us, 2),
            "p90_us": round(self.p90_us, 2),
            "mean_us": round(self.mean_us, 2),
            "samples": self.samples,
            "correct": self.correct,
        }


def merge(raws: list[dict[str, Any]]) -> dict[str, Any]:
    """Pool the samples of interleaved repeats of one configuration (same sizes, same order)."""
    if not raws:
        raise ValueError("no runs to merge")
    merged = {k: v for k, v in raws[0].items() if k != "results"}
    pooled: dict[int, dict[str, Any]] = {}
    for raw in raws:
        for entry in raw.get("results", []):
            slot = pooled.setdefault(
                int(entry["bytes"]),
                {"bytes": int(entry["bytes"]), "samples_us": [], "correct": True},
            )
            slot["samples_us"].extend(entry["samples_us"])
            slot["correct"] = slot["correct"] and bool(entry.get("correct", True))
    merged["results"] = [pooled[b] for b in sorted(pooled)]
    merged["repeats"] = len(raws)
    return merged


def summarize(raw: dict[str, Any]) -> list[SizeStats]:
    out: list[SizeStats] = []
    for entry in raw.get("results", []):
        samples = [float(x) for x in entry["samples_us"]]
        out.append(
            SizeStats(
                bytes=int(entry["bytes"]),
                p50_us=percentile(samples, 50),
                p90_us=percentile(samples, 90),
                mean_us=statistics.fmean(samples),
                samples=len(samples),
                correct=bool(entry.get("correct", True)),
            )
        )
    return out


def decode_step_cost_us(
    p50_us: float, layers: int = KIMI_K25_LAYERS, per_layer: int = ALLREDUCES_PER_LAYER
) -> float:
    return p50_us * layers * per_layer


def compare(profile: list[SizeStats], defaults: list[SizeStats]) -> list[dict[str, Any]]:
    """Per size: both p50/p90 and the ratio profile/defaults (> 1 means the profile is slower)."""
    base = {s.bytes: s for s in defaults}
    rows: list[dict[str, Any]] = []
    for s in profile:
        d = base.get(s.bytes)
        rows.append(
            {
                "bytes": s.bytes,
                "tokens": s.bytes // (KIMI_K25_HIDDEN * BF16_BYTES)
                if s.bytes % (KIMI_K25_HIDDEN * BF16_BYTES) == 0
                else None,
                "profile_p50_us": round(s.p50_us, 2),
                "profile_p90_us": round(s.p90_us, 2),
                "defaults_p50_us": round(d.p50_us, 2) if d else None,
                "defaults_p90_us": round(d.p90_us, 2) if d else None,
                "p50_ratio": round(s.p50_us / d.p50_us, 3) if d and d.p50_us > 0 else None,
            }
        )
    return rows
