"""benchmarks/h200_sglang/h200_sglang_prereg.py's warm-up drop (issue 22): the first bench of a one-server
series is left out of its CV and mean, and too few benches left is an error naming the file."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.h200_sglang.h200_sglang_prereg import kept_benches, knob_ratios, within_cvs  # noqa: E402

from .conftest import synthetic_server  # noqa: E402

M2 = ROOT / "benchmarks" / "h200_sglang" / "results" / "machine2"


def series(tmp: Path, name: str, throughputs: list[float], ttfts: list[float]) -> Path:
    benches = [
        {"concurrency": 16, "output_throughput": t, "mean_ttft_ms": f}
        for t, f in zip(throughputs, ttfts, strict=True)
    ]
    path = tmp / name
    path.write_text(json.dumps({"benches": benches, "within_server": {
        "output_throughput": {}, "mean_ttft_ms": {}}}))  # fmt: skip
    return path


def test_machine2_first_series_without_its_warm_up_bench() -> None:
    """The kept file: all 6 benches reproduce the stored CV; dropping the first gives 2-6's."""
    data = json.loads((M2 / "within.json").read_text())
    values = data["within_server"]["output_throughput"]["values"]
    assert within_cvs(M2 / "within.json", 0)["serve-bench.sweep/output_throughput@c16"] == (
        pytest.approx(data["within_server"]["output_throughput"]["cv"], abs=1e-5)
    )
    dropped = within_cvs(M2 / "within.json", 1)
    assert dropped["serve-bench.sweep/output_throughput@c16"] == pytest.approx(
        statistics.stdev(values[1:]) / statistics.fmean(values[1:])
    )
    assert (
        dropped["serve-bench.sweep/mean_ttft_ms@c16"]
        < 0.5 * within_cvs(M2 / "within.json", 0)["serve-bench.sweep/mean_ttft_ms@c16"]
    )


@pytest.mark.parametrize("discard", [0, 1, 2])
def test_knob_ratio_uses_the_same_kept_benches(tmp_path: Path, discard: int) -> None:
    base = series(tmp_path, "b.json", [50.0, 100.0, 100.0, 100.0], [500.0, 10.0, 10.0, 10.0])
    knob = series(tmp_path, "k.json", [100.0, 90.0, 90.0, 90.0], [10.0, 20.0, 20.0, 20.0])
    keys = ["serve-bench.sweep/output_throughput@c16", "serve-bench.sweep/mean_ttft_ms@c16"]
    ratios = knob_ratios(base, knob, keys, discard)
    if discard:
        assert ratios[keys[0]] == pytest.approx(0.9)
        assert ratios[keys[1]] == pytest.approx(0.5)  # lower is better: oriented
    else:
        assert ratios[keys[0]] == pytest.approx(92.5 / 87.5)
        assert ratios[keys[1]] > 1  # the warm-up bench's 500 ms made the base look slower


@pytest.mark.parametrize("n", [1, 2, 3])
def test_too_few_benches_left_is_an_error_naming_the_file(tmp_path: Path, n: int) -> None:
    path = series(tmp_path, "w.json", [1.0] * n, [1.0] * n)
    with pytest.raises(SystemExit, match=r"w\.json: benches: .* fewer than 2"):
        kept_benches(path, n - 1)
    if n >= 2:  # one bench fewer dropped leaves 2: taken
        assert kept_benches(path, n - 2)[0] == 16


def test_long_benches_run_rounds_times_the_factor() -> None:
    """h200_sglang_within.run_benches on a real loopback token server: a bench at rounds x L
    sends L times the requests (what --long-benches measures), each one recorded with it."""
    from benchmarks.h200_sglang.h200_sglang_within import run_benches
    from stackgate.manifest import BenchSettings
    from validators.serve import bench_client

    settings = BenchSettings(input_len=8, output_len=4, rounds=1, concurrencies=[2, 4])
    longer = settings.model_validate({**settings.model_dump(), "rounds": 3})
    with synthetic_server("--rate", "2000") as url:
        target = bench_client.Target(url, "synthetic")
        short, long = run_benches(target, settings, 2), run_benches(target, longer, 1)
        assert [(b["bench"], b["concurrency"], b["rounds"]) for b in short] == [
        (0, 2, 1), (0, 4, 1), (1, 2, 1), (1, 4, 1)
    ]  # fmt: skip
    assert [(b["concurrency"], b["rounds"]) for b in long] == [(2, 3), (4, 3)]
    assert all(b["output_throughput"] and b["output_throughput"] > 0 for b in short + long)
    assert run_benches(target, settings, 0) == []
