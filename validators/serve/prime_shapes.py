"""Put the engine's prefill batch shapes through it once before any measured window.

An engine compiles some kernels the first time it meets a shape (Triton's JIT keys fused-MoE or
attention kernels on the batch's token count bucket), and which prefill batches a level meets
depends on how its arrivals split (16 requests as one batch, or 1 + 15, or 4 + 12). A compile
inside a measured window stalls that bench, and one slow bench leaves the gate UNDERPOWERED.

So before the first level, bursts of k prompts of the bench's input length with two output
tokens each run, for k = 1 .. min(C_max, 16) and every level C of the sweep. A burst split by
jitter splits into sizes the other bursts cover; above 16 prompts only the level's own burst is
primed.
"""

from __future__ import annotations

from collections.abc import Callable

from stackgate.manifest import BenchSettings
from validators.serve.bench_client import (
    RequestOutcome,
    Target,
    make_prompts,
    open_client,
    run_requests,
)
from validators.serve.owned_loop import run_owned

EVERY_SIZE_UP_TO = 16
STREAM = 2_000_000  # prompt streams of their own: never a warm-up's or a measured level's


def burst_sizes(settings: BenchSettings) -> list[int]:
    top = max(settings.concurrencies)
    return sorted(set(range(1, min(top, EVERY_SIZE_UP_TO) + 1)) | set(settings.concurrencies))


def prime(
    target: Target, settings: BenchSettings, *, pending: Callable[[], int | None] | None = None
) -> dict[str, int]:
    """Send the bursts one after another; {"priming_requests": n, "priming_failed": f}."""
    short = settings.model_copy(update={"output_len": 2})

    async def bursts() -> list[RequestOutcome]:
        client = open_client(target)
        done: list[RequestOutcome] = []
        try:
            for k in burst_sizes(settings):
                prompts = make_prompts(short, k, stream=STREAM + k)
                outcomes, _ = await run_requests(client, target, prompts, short, k)
                done.extend(outcomes)
        finally:
            client.abandon()
        return done

    outcomes = run_owned(bursts(), pending=pending)
    return {
        "priming_requests": len(outcomes),
        "priming_failed": sum(not o.success for o in outcomes),
    }
