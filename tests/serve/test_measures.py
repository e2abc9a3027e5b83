"""Typed measurements (issue 28 §1): the serve-bench group declares each number's unit and
which way is better where it measures it (validators/serve/measures.py), and records read
the measurements instead of guessing shapes and units (validators/records/extract.py).

Records keep their format: the same numbers give the same metric keys, samples and
distributions whether a report carries measurements or only the old evidence (every level
shape the real run_level makes: several levels, single-stream, no request succeeding)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from stackgate.errors import BadInput
from tests.helpers import synth_reports as synth
from validators.core.results import Measurement, Report, Result, make_result
from validators.records.extract import refuse_invalid, run_metrics
from validators.records.metrics import direction, metric_key
from validators.serve.bench_client import RequestOutcome, level_fields
from validators.serve.measures import METRICS, NOT_MEASURED, SAMPLES, measurements


def _outcome(rng: np.random.Generator, ok: bool = True, out_len: int = 32) -> RequestOutcome:
    ttft = float(rng.uniform(0.05, 0.3))
    itl = [float(x) for x in rng.uniform(0.008, 0.02, size=max(out_len - 1, 0))]
    return RequestOutcome(
        ok, "" if ok else "HTTP 500", input_len=64, output_len=out_len if ok else 0,
        ttft=ttft, latency=ttft + sum(itl), itl=itl,
    )  # fmt: skip


def _level(
    seed: int, conc: int, n: int = 12, failing: int = 0, out_len: int = 32
) -> dict[str, Any]:
    """A level's fields, made by the real bench_client code from measured request outcomes."""
    rng = np.random.default_rng(seed)
    outcomes = [_outcome(rng, i >= failing, out_len) for i in range(n)]
    warm = [_outcome(rng) for _ in range(max(2, conc))]
    return level_fields(outcomes, duration=2.5, concurrency=conc, count=n, warm_out=warm)


def test_every_field_a_level_writes_is_declared_and_the_gate_reads_it_the_same_way() -> None:
    fields = set(_level(0, 4)) | {"single_stream_decode_tok_s"}
    assert fields - set(METRICS) - set(SAMPLES) - NOT_MEASURED == set()
    for name, (unit, better) in METRICS.items():
        assert unit, name
        for key in (name, metric_key(name, 16, "serve-bench.sweep")):
            assert direction(key) == better, key


def _legacy_report(levels: list[dict[str, Any]], single: dict[str, Any]) -> Report:
    """The same numbers as the serve group wrote them before measurements."""
    return Report(
        stack="cu128",
        started_at="2026-12-01T00:00:00+00:00",
        results=[
            make_result("serve-bench.single_stream", "PASS", "ok", single, group="serve-bench"),
            make_result("serve-bench.sweep", "PASS", "ok", {"levels": levels}, group="serve-bench"),
        ],
    )


def _typed_report(levels: list[dict[str, Any]], single: dict[str, Any]) -> Report:
    summary = [{k: v for k, v in m.items() if k not in SAMPLES} for m in levels]
    swept = [x for m in levels for x in measurements(m, int(m["max_concurrency"]))]
    return Report(
        stack="cu128",
        started_at="2026-12-01T00:00:00+00:00",
        results=[
            make_result(
                "serve-bench.single_stream", "PASS", "ok", single, group="serve-bench",
                measurements=measurements(single, None),
            ),
            make_result(
                "serve-bench.sweep", "PASS", "ok", {"levels": summary}, group="serve-bench",
                measurements=swept,
            ),
        ],
    )  # fmt: skip


KEEP = ("single_stream_decode_tok_s", "output_throughput", "median_tpot_ms", "mean_ttft_ms",
        "completed", "failed")  # fmt: skip


@pytest.mark.parametrize(
    "levels",
    [
        [(1, 0, 32), (4, 0, 32), (16, 0, 32), (64, 0, 32)],
        [(8, 3, 32)],  # some requests failed
        [(2, 12, 32)],  # none succeeded: empty samples, zero throughput
        [(4, 0, 1)],  # one token each: no TPOT samples
    ],
)
def test_measurements_make_the_same_record_numbers_as_the_old_evidence(
    levels: list[tuple[int, int, int]],
) -> None:
    made = [_level(i, c, failing=f, out_len=o) for i, (c, f, o) in enumerate(levels)]
    one = _level(99, 1)
    one["single_stream_decode_tok_s"] = 1000.0 / one["median_tpot_ms"]
    single = {k: one[k] for k in KEEP}
    old, new = run_metrics(_legacy_report(made, single)), run_metrics(_typed_report(made, single))
    assert old.invalid == new.invalid == []
    assert new.metrics == old.metrics and new.distributions == old.distributions
    assert "serve-bench.single_stream/single_stream_decode_tok_s" in new.metrics
    conc = levels[0][0]
    assert f"serve-bench.sweep/output_throughput@c{conc}" in new.metrics
    assert f"serve-bench.sweep/ttft_ms@c{conc}" in new.distributions


def test_a_declaration_the_gate_would_read_backwards_is_refused_by_name() -> None:
    backwards = Measurement(name="mean_ttft_ms", unit="ms", better="higher", value=120.0)
    report = Report(
        stack="cu128",
        started_at="2026-12-01T00:00:00+00:00",
        results=[
            Result(check="serve-bench.sweep", group="serve-bench", status="PASS", reason="",
                   measurements=[backwards]),
        ],
    )  # fmt: skip
    run = run_metrics(report)
    assert run.metrics == {}
    with pytest.raises(BadInput) as caught:
        refuse_invalid([run], where=["run 1"])
    assert "serve-bench.sweep/mean_ttft_ms: measured as better=higher" in caught.value.details[0]


@pytest.mark.parametrize(
    "fields",
    [
        {"value": math.nan},
        {"value": math.inf},
        {"value": -1.0},
        {"samples": [1.0, math.nan]},
        {"samples": [-0.5]},
        {},  # neither
        {"value": 1.0, "samples": [1.0]},  # both
        {"value": 1.0, "name": "sweep/output_throughput"},  # a key, not a name
        {"value": 1.0, "concurrency": 0},
        {"value": "12"},
    ],
)
def test_a_measurement_that_no_gate_could_compare_is_refused(fields: dict[str, Any]) -> None:
    base: dict[str, Any] = {"name": "output_throughput", "unit": "tok/s", "better": "higher"}
    with pytest.raises(ValidationError):
        Measurement.model_validate({**base, **fields})


def test_an_undeclared_field_is_an_error_where_it_is_measured() -> None:
    with pytest.raises(ValueError, match="'goodput' is not declared"):
        measurements({"goodput": 1.0}, 4)


def test_records_from_measured_reports_keep_the_record_format() -> None:
    from stackgate.manifest.loading import load_stack
    from validators.records.compose import compose_record
    from validators.records.model import BuildFacts, HostFingerprint

    rng = np.random.default_rng(3)
    typed = [synth.make_report(rng, measured=True) for _ in range(3)]
    rng = np.random.default_rng(3)
    legacy = [synth.make_report(rng) for _ in range(3)]
    made = [
        compose_record(load_stack("cu128"), runs, build=BuildFacts(), host=HostFingerprint(),
                       kind="candidate")
        for runs in (typed, legacy)
    ]  # fmt: skip
    assert made[0].metrics == made[1].metrics and made[0].metrics
    for record in made:
        dumped = record.model_dump(mode="json")
        assert all("measurements" not in check for check in dumped["checks"])
    assert any(r.measurements for r in typed[0].results)


def test_every_committed_record_loads_and_keeps_its_id_and_checks() -> None:
    """Records keep their format: the committed ones (records/) load, their ids verify, and
    their checks write back as they are in the file (no `measurements` key appears)."""
    import json
    from pathlib import Path

    from validators.records.json_files import read_record_file

    files = sorted((Path(__file__).resolve().parents[2] / "records").rglob("*.json"))
    assert files
    for path in files:
        record = read_record_file(path)
        assert record.compute_id() == record.record_id, path
        data = json.loads(path.read_text())
        assert record.model_dump(mode="json")["checks"] == data["checks"], path
        assert record.metrics, path
