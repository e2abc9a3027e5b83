"""A record stores each metric's direction and tolerance class when it is written; the gate
reads them from the record, and derives them (validators/records/gated.py: facts_for) only for
records written before they were kept, which read, dump and hash as they always did."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from stackgate.manifest.loading import load_stack
from tests.helpers.synth_reports import make_report
from validators.gate.compare import gate
from validators.records.compose import compose_record
from validators.records.gated import MetricFacts, facts_for
from validators.records.model import BuildFacts, HostFingerprint, Record, load_record

ROOT = Path(__file__).resolve().parents[2]
THROUGHPUT = "serve-bench.sweep/output_throughput@c16"
TTFT = "serve-bench.sweep/median_ttft_ms@c16"


def _record(seed: int, kind: str = "known-good") -> Record:
    rng = np.random.default_rng(seed)
    reports = [make_report(rng, measured=True) for _ in range(8)]
    return compose_record(load_stack("cu128"), reports, build=BuildFacts(),
                          host=HostFingerprint(hostname="h1"), kind=kind)  # type: ignore[arg-type]  # fmt: skip


def test_a_new_record_stores_every_metrics_facts_as_declared() -> None:
    record = _record(0)
    assert set(record.metric_facts) == set(record.metrics)
    assert record.metric_facts[THROUGHPUT] == MetricFacts(
        direction="higher", tolerance_class="main"
    )
    assert record.metric_facts[TTFT] == MetricFacts(direction="lower", tolerance_class="tail")
    ungated = [f for k, f in record.metric_facts.items() if f.tolerance_class is None]
    assert ungated and all(f == facts_for(k) for k, f in record.metric_facts.items())
    again = load_record(json.loads(record.to_json()), where="test")
    assert again == record


def test_a_record_without_facts_dumps_and_hashes_as_before() -> None:
    old = _record(0).model_copy(update={"metric_facts": {}}).sealed()
    assert "metric_facts" not in old.to_json()
    committed = sorted((ROOT / "records").rglob("*.json"))
    assert committed
    for path in committed:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("schema_version") != 1 or "metrics" not in data:
            continue  # the chain head, not a record
        record = load_record(data, where=str(path))
        assert not record.metric_facts and record.to_json() == path.read_text(encoding="utf-8")


def test_the_gate_reads_the_stored_facts_before_the_profile() -> None:
    baseline, candidate = _record(1), _record(2, "candidate")
    derived = {v.key: v for v in gate(baseline, candidate).metrics}
    assert derived[TTFT].gated and derived[TTFT].tolerance_class == "tail"
    shown = {TTFT: MetricFacts(direction="lower")}  # stored as ungated: shown only
    result = gate(
        baseline.model_copy(update={"metric_facts": shown}),
        candidate.model_copy(update={"metric_facts": shown}),
    )
    stored = {v.key: v for v in result.metrics}
    assert not stored[TTFT].gated and stored[TTFT].status == "UNGATED"
    assert stored[THROUGHPUT].gated  # no stored facts for it: the profile's
