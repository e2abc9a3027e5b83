"""Prefill shapes are primed before any measured window: a real synthetic server process over
real HTTP, whose first prefill batch of each size waits 0.4 s and is listed in its books (its `--compile-stall-s`, standing
for an engine's JIT meeting a token count for the first time; SGLang's Triton kernels on a lent
H200 did this inside one measured bench)."""

from __future__ import annotations

import json
import urllib.request

from stackgate.manifest import BenchSettings
from validators.serve import bench_client, prime_shapes

from .conftest import synthetic_server

STALL_S = 0.4


def _stats(url: str) -> dict[str, object]:
    with urllib.request.urlopen(f"{url}/stats", timeout=10) as r:
        return dict(json.loads(r.read()))


def test_burst_sizes_cover_every_batch_up_to_16_and_each_level() -> None:
    settings = BenchSettings(input_len=8, output_len=4, concurrencies=[1, 4, 16, 64, 250])
    assert prime_shapes.burst_sizes(settings) == [*range(1, 17), 64, 250]
    small = BenchSettings(input_len=8, output_len=4, concurrencies=[3])
    assert prime_shapes.burst_sizes(small) == [1, 2, 3]


def _split_bursts(target: bench_client.Target, settings: BenchSettings) -> list[float]:
    """Bursts of the sizes arrival jitter splits a level of 8 into (5 + 3, 2 + 6, 7 + 1): the
    slowest first token of each."""
    import asyncio

    async def bursts() -> list[float]:
        client = bench_client.open_client(target)
        worst = []
        try:
            for n, k in enumerate((5, 3, 2, 6, 7, 1)):
                prompts = bench_client.make_prompts(settings, k, stream=900 + n)
                got, _ = await bench_client.run_requests(client, target, prompts, settings, k)
                assert all(o.success for o in got)
                worst.append(max(o.ttft for o in got))
        finally:
            client.abandon()
        return worst

    return asyncio.run(bursts())


def test_without_priming_splits_stall_and_with_it_none_does() -> None:
    settings = BenchSettings(input_len=16, output_len=8, concurrencies=[8], rounds=1)
    flags = ("--rate", "400", "--compile-stall-s", str(STALL_S))
    with synthetic_server(*flags) as url:
        target = bench_client.Target(url, "synthetic")
        cold = _split_bursts(target, settings)
        stalled_cold = _stats(url)["compile_stalls"]
    # the server's own books say what compiled: the first burst of each size
    assert sorted(stalled_cold) == [1, 2, 3, 5, 6, 7], stalled_cold  # type: ignore[call-overload]
    assert len(cold) == 6
    with synthetic_server(*flags) as url:
        target = bench_client.Target(url, "synthetic")
        primed = prime_shapes.prime(target, settings)
        after_priming = list(_stats(url)["compile_stalls"])  # type: ignore[call-overload]
        warm = _split_bursts(target, settings)
        stalled_warm = _stats(url)["compile_stalls"]
    assert primed == {"priming_requests": sum(range(1, 9)), "priming_failed": 0}
    assert sorted(after_priming) == list(range(1, 9))
    assert stalled_warm == after_priming  # every split had been met while priming
    assert len(warm) == 6
