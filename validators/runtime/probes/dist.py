# mypy: ignore-errors
# (runs under the environment's interpreter, where torch is untyped for us)
"""Multi-GPU probe, one process per GPU, run by the environment's own interpreter.

Usage: python dist.py MODE OUT_JSON [SIZES_BYTES,...] [ITERS]
MODE: `nccl` (all-reduce latency per size, per-iteration CUDA-event timing, samples of rank 0)
      `symm_mem` (torch symmetric-memory rendezvous: does it work, is multicast on).
Rank/world/master from RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (set by the orchestrator).
Rank 0 writes OUT_JSON. Must not import stackgate.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from datetime import timedelta
from typing import Any


def _write(path: str, payload: dict[str, Any]) -> None:
    with open(path, "w", encoding="utf-8") as f:  # noqa: PTH123 (stdlib only, any Python)
        json.dump(payload, f, default=str)


# STACKGATE_DIST_BACKEND=gloo runs the same probe on CPUs (tests without a GPU): timing by
# the host clock instead of CUDA events.
BACKEND = os.environ.get("STACKGATE_DIST_BACKEND", "nccl")


def _setup() -> Any:
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    if BACKEND == "nccl":
        torch.cuda.set_device(rank % torch.cuda.device_count())
    dist.init_process_group(BACKEND, timeout=timedelta(seconds=120))
    return torch, dist, rank, ("cuda" if BACKEND == "nccl" else "cpu")


def _time_ops(torch: Any, dist: Any, x: Any, n: int) -> list[float]:
    """Microseconds per all-reduce, one sample per call (each call starts on an idle stream)."""
    if BACKEND != "nccl":
        samples = []
        for _ in range(n):
            t = time.perf_counter()
            dist.all_reduce(x)
            samples.append((time.perf_counter() - t) * 1e6)
        return samples
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        torch.cuda.synchronize()
        starts[i].record()
        dist.all_reduce(x)
        ends[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1000.0 for s, e in zip(starts, ends, strict=True)]


def run_nccl(out: str, sizes: list[int], iters: int) -> None:
    torch, dist, rank, device = _setup()
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    elem = 2 if device == "cuda" else 4
    nccl_env = {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}
    results: list[dict[str, Any]] = []
    warm = torch.ones(1024, device=device, dtype=dtype)
    for _ in range(20):
        dist.all_reduce(warm)
    if device == "cuda":
        torch.cuda.synchronize()
    for size in sizes:
        numel = max(1, size // elem)
        x = torch.ones(numel, device=device, dtype=dtype)
        for _ in range(10):
            dist.all_reduce(x)
        if device == "cuda":
            torch.cuda.synchronize()
        n = iters if size <= (1 << 22) else max(min(20, iters), iters // 5)
        samples = _time_ops(torch, dist, x, n)
        # Correctness: ones summed over the world.
        x.fill_(1.0)
        dist.all_reduce(x)
        ok = bool(torch.all(x == float(dist.get_world_size())).item())
        results.append({"bytes": numel * elem, "samples_us": samples, "correct": ok})
    if rank == 0:
        cuda = device == "cuda"
        _write(
            out,
            {
                "mode": "nccl",
                "backend": BACKEND,
                "world_size": dist.get_world_size(),
                "torch": torch.__version__,
                "nccl": ".".join(map(str, torch.cuda.nccl.version())) if cuda else None,
                "device": torch.cuda.get_device_name() if cuda else "cpu",
                "cc": list(torch.cuda.get_device_capability()) if cuda else None,
                "nccl_env": nccl_env,
                "results": results,
            },
        )
    dist.barrier()
    dist.destroy_process_group()


def run_symm_mem(out: str) -> None:
    torch, dist, rank, _device = _setup()
    payload: dict[str, Any] = {
        "mode": "symm_mem",
        "world_size": dist.get_world_size(),
        "torch": torch.__version__,
        "cc": list(torch.cuda.get_device_capability()),
        "TORCH_SYMM_MEM_DISABLE_MULTICAST": os.environ.get("TORCH_SYMM_MEM_DISABLE_MULTICAST"),
    }
    t = time.perf_counter()
    try:
        import torch.distributed._symmetric_memory as symm_mem

        buf = symm_mem.empty(1 << 20, device="cuda", dtype=torch.bfloat16)
        handle = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)
        payload["ok"] = True
        payload["multicast_ptr_nonzero"] = bool(getattr(handle, "multicast_ptr", 0))
        payload["world_size_handle"] = int(getattr(handle, "world_size", -1))
        # One real exchange through the peer buffers: each rank writes its rank, reads the next.
        buf.fill_(float(rank))
        handle.barrier()
        peer = (rank + 1) % dist.get_world_size()
        peer_buf = handle.get_buffer(peer, buf.shape, buf.dtype)
        payload["peer_read_ok"] = bool(torch.all(peer_buf == float(peer)).item())
        handle.barrier()
    except Exception as exc:
        payload["ok"] = False
        payload["error"] = "".join(traceback.format_exception_only(type(exc), exc)).strip()[-2000:]
    payload["seconds"] = round(time.perf_counter() - t, 3)
    if rank == 0:
        _write(out, payload)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    mode, out = sys.argv[1], sys.argv[2]
    if mode == "nccl":
        sizes = [int(s) for s in sys.argv[3].split(",")]
        iters = int(sys.argv[4]) if len(sys.argv) > 4 else 200
        run_nccl(out, sizes, iters)
    elif mode == "symm_mem":
        run_symm_mem(out)
    else:
        sys.exit(f"unknown mode {mode}")
