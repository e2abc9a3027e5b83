"""Small real records for store and file tests (built with the record model, sealed)."""

from __future__ import annotations

from validators.core.results import Result
from validators.records.model import BuildFacts, HostFingerprint, Record

THROUGHPUT = "serve-bench.sweep/output_throughput@c16"
TTFT = "serve-bench.sweep/median_ttft_ms@c16"


def make_record(
    stack: str = "smoke",
    *,
    note: str = "",
    minute: int = 0,
    kind: str = "known-good",
    throughput: float = 1000.0,
    runs: int = 8,
) -> Record:
    samples = [throughput * (1 + 0.002 * (i % 3 - 1)) for i in range(runs)]
    return Record.model_validate(
        {
            "kind": kind,
            "stack": stack,
            "created_at": f"2026-01-01T10:{minute:02d}:00+00:00",
            "stackgate_version": "0.1.0",
            "note": note or None,
            "build": BuildFacts(env_tree_sha256="ab" * 32).model_dump(),
            "host": HostFingerprint(hostname="h1").model_dump(),
            "runs": runs,
            "checks": [
                Result(check="serve-bench.sweep", group="serve-bench", status="PASS", reason="ok")
            ],
            "metrics": {THROUGHPUT: samples, TTFT: [200.0 + i for i in range(runs)]},
        }
    ).sealed()
