"""The gate's synthetic reports stay shaped like the validators' real ones: a renamed check id
or a renamed sweep field breaks them here, not silently in every gate test."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import synth_reports as synth
from tests.helpers.check_ids import group_of
from validators.serve.bench_client import RequestOutcome, compute_metrics

# What run_level (validators/serve/bench_client.py) adds to compute_metrics' fields per level.
RUN_LEVEL_EXTRAS = {
    "ttfts_ms", "e2e_latencies_ms", "tpots_ms", "max_concurrency", "num_prompts",
    "warmup_requests", "warmup_failed",
}  # fmt: skip
# The one field the synthetic levels carry that run_level leaves out (one sample per token);
# validators/records/extract.py reads it as bench_serving --output-details writes it.
NOT_FROM_RUN_LEVEL = {"itls_ms"}


def _real_level_fields() -> set[str]:
    outcome = RequestOutcome(True, input_len=8, output_len=4, ttft=0.1, latency=0.4,
                             itl=[0.1, 0.1, 0.1], start=0.0, token_times=[(0.1, 1)])  # fmt: skip
    return set(compute_metrics([outcome], 1.0)) | RUN_LEVEL_EXTRAS


def test_every_synthetic_result_has_a_registered_id_in_its_group() -> None:
    report = synth.make_report(np.random.default_rng(0), raw=True)
    assert [r.check for r in report.results][-1] == "serve-bench.sweep"
    for result in report.results:
        assert group_of(result.check) == result.group, result.check


def test_synthetic_sweep_levels_use_the_real_sweeps_field_names() -> None:
    report = synth.make_report(np.random.default_rng(0), raw=True)
    sweep = next(r for r in report.results if r.check == "serve-bench.sweep")
    real = _real_level_fields()
    for level in sweep.evidence["levels"]:
        assert set(level) - real - NOT_FROM_RUN_LEVEL == set()


def test_a_check_id_no_validator_emits_breaks_the_fixture(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    drifted = "runtime.flashinfer" + ".jit"  # split so the id scan does not count it as named
    monkeypatch.setattr(synth, "CHECKS", (*synth.CHECKS, (drifted, "runtime")))
    with pytest.raises(ValueError, match=r"not in validators\.core\.checks"):
        synth.make_report(np.random.default_rng(0))
