"""The runtime group's distributed checks: symm-mem rendezvous and NCCL all-reduce latency,
one process per rank, at the serving profile's tensor-parallel size (validators/runtime/ranks.py).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from stackgate.manifest import Manifest
from stackgate.topology import Topology
from validators.core.checks import RuntimeCheck
from validators.core.context import RunContext
from validators.core.results import Result, Status, make_result
from validators.runtime import nccl_latency as nl
from validators.runtime.ranks import plan_ranks
from validators.runtime.runner import ProbeOutcome, probe_env, run_distributed

GROUP = "runtime"
NCCL_PREFIX = "NCCL_"

_r = functools.partial(make_result, group=GROUP)


def _from(check: RuntimeCheck, o: ProbeOutcome) -> Result:
    return _r(check, o.status, o.reason, o.evidence, o.seconds)


def profile_tp(manifest: Manifest) -> int:
    name = manifest.validation.serve_profile
    profile = manifest.serving.get(name) if name else None
    return profile.tp if profile is not None else 1


def distributed_checks(
    ctx: RunContext,
    python: Path,
    env: dict[str, str],
    stack_env: dict[str, str],
    topology: Topology | None,
    gpus: int,
    torch_o: ProbeOutcome,
) -> list[Result]:
    """symm-mem and NCCL latency with one process per rank, at the serving profile's TP."""
    tp = profile_tp(ctx.stack.manifest)
    override = ctx.options.runtime.ranks
    plan = plan_ranks(tp, gpus, env, override)
    if plan.skip is not None and plan.ranks < 2 and override is None:
        # A TP-1 profile has no collective: nothing distributed to check, nothing to claim.
        return []
    if plan.skip is not None:
        return [
            _r("runtime.symm_mem", "SKIP", plan.skip, {"ranks": plan.ranks, "gpus": gpus}),
            _r("runtime.nccl_latency", "SKIP", plan.skip, {"ranks": plan.ranks, "gpus": gpus}),
        ]
    if plan.backend == "nccl" and torch_o.status != "PASS":
        why = f"torch probe did not pass ({torch_o.reason[:200]})"
        return [_r("runtime.symm_mem", "SKIP", why), _r("runtime.nccl_latency", "SKIP", why)]
    timeout = ctx.options.runtime.probe_timeout or ctx.stack.manifest.validation.timeouts.check_s
    logs = ctx.out_dir / "runtime-logs" if ctx.out_dir else None
    out = []
    if plan.backend == "nccl":
        out.append(_symm_mem(python, env, plan.ranks, timeout, logs))
    else:
        out.append(
            _r("runtime.symm_mem", "SKIP", f"{plan.backend} backend: symmetric memory needs CUDA")
        )
    out.append(_nccl(ctx, python, stack_env, topology, plan.ranks, timeout, logs))
    if plan.note:
        out = [
            r.model_copy(
                update={
                    "reason": f"{r.reason} [{plan.note}]",
                    "evidence": {**r.evidence, "profile_tp": plan.profile_tp},
                }
            )
            for r in out
        ]
    return out


def _symm_mem(
    python: Path, env: dict[str, str], world: int, timeout: float, logs: Path | None
) -> Result:
    o = run_distributed(
        python, ["symm_mem"], world_size=world, env=env, timeout=timeout, log_dir=logs
    )
    if o.status != "PASS":
        return _from("runtime.symm_mem", o)
    d = o.evidence
    if not d.get("ok"):
        err = str(d.get("error", ""))
        hint = (
            " -- with multicast on, some hosts fail here: set TORCH_SYMM_MEM_DISABLE_MULTICAST=1"
            if "invalid argument" in err
            else ""
        )
        return _r(
            "runtime.symm_mem",
            "FAIL",
            f"rendezvous across {world} GPUs failed: {err}{hint}",
            d,
            o.seconds,
        )
    peer = d.get("peer_read_ok")
    status: Status = "PASS" if peer else "FAIL"
    return _r(
        "runtime.symm_mem",
        status,
        f"torch symmetric-memory rendezvous across {world} GPUs "
        + (
            "works, peer buffers readable"
            if peer
            else "returned, but a peer buffer read wrong data"
        )
        + f"; multicast {'on' if d.get('multicast_ptr_nonzero') else 'off'}",
        d,
        o.seconds,
    )


def _nccl_runs(
    ctx: RunContext,
    python: Path,
    stack_env: dict[str, str],
    world: int,
    timeout: float,
    logs: Path | None,
) -> tuple[dict[str, list[dict[str, Any]]], float] | Result:
    """The all-reduce probe under the profile's NCCL variables and under NCCL's defaults,
    interleaved (A B A B ...): one A-then-B pair can flip the 1-token winner between two
    otherwise identical runs; pooling interleaved repeats keeps drift out of the ratio.
    Returns each configuration's raw results and the seconds spent, or the failing result."""
    sizes = nl.message_sizes()
    args = ["nccl", ",".join(map(str, sizes)), str(ctx.options.runtime.nccl_iters)]
    configs = (
        ("profile", stack_env),
        ("defaults", {k: v for k, v in stack_env.items() if not k.startswith(NCCL_PREFIX)}),
    )
    raw: dict[str, list[dict[str, Any]]] = {"profile": [], "defaults": []}
    seconds = 0.0
    for rep in range(ctx.options.runtime.nccl_repeats):
        for label, extra in configs:
            env = probe_env(extra, drop_prefixes=(NCCL_PREFIX,))
            o = run_distributed(
                python,
                args,
                world_size=world,
                env=env,
                timeout=max(timeout, 300.0),
                log_dir=logs,
                tag=f"{label}-{rep}",
            )
            if o.status != "PASS":
                return _from(
                    "runtime.nccl_latency",
                    ProbeOutcome(o.status, f"{label} run {rep}: {o.reason}", o.evidence, o.seconds),
                )
            raw[label].append(o.evidence)
            seconds += o.seconds
    return raw, seconds


def _one_token(stats: list[nl.SizeStats]) -> nl.SizeStats:
    """The all-reduce one decode token makes (one hidden state in bf16)."""
    return next(s for s in stats if s.bytes == nl.KIMI_K25_HIDDEN * nl.BF16_BYTES)


def _p50_per_repeat(raw: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[int, float]]]:
    """Each repeat's p50 at the 1-token and the 64 MB size: the drift between repeats."""
    keep = (nl.KIMI_K25_HIDDEN * nl.BF16_BYTES, 64 << 20)
    return {
        label: [
            {s.bytes: round(s.p50_us, 1) for s in nl.summarize(item) if s.bytes in keep}
            for item in items
        ]
        for label, items in raw.items()
    }


def _nccl(
    ctx: RunContext,
    python: Path,
    stack_env: dict[str, str],
    topology: Topology | None,
    world: int,
    timeout: float,
    logs: Path | None,
) -> Result:
    ran = _nccl_runs(ctx, python, stack_env, world, timeout, logs)
    if isinstance(ran, Result):
        return ran
    raw, seconds = ran
    runs = {label: nl.merge(items) for label, items in raw.items()}
    prof = nl.summarize(runs["profile"])
    base = nl.summarize(runs["defaults"])
    rows = nl.compare(prof, base)
    one, one_d = _one_token(prof), _one_token(base)
    step = nl.decode_step_cost_us(one.p50_us)
    step_d = nl.decode_step_cost_us(one_d.p50_us)
    evidence = {
        "topology_profile": topology,
        "profile_env": {k: v for k, v in stack_env.items() if k.startswith(NCCL_PREFIX)},
        "world_size": world,
        "nccl": runs["profile"].get("nccl"),
        "device": runs["profile"].get("device"),
        "rows": rows,
        "repeats": ctx.options.runtime.nccl_repeats,
        "p50_us_per_repeat": _p50_per_repeat(raw),
        "decode_step_allreduce_us": {
            "profile": round(step, 1),
            "defaults": round(step_d, 1),
            "allreduces": nl.ALLREDUCES_PER_LAYER * nl.KIMI_K25_LAYERS,
        },
        # Numbers a record keeps per run (validators/records/extract.py reads "metrics"): the
        # fleet verdict compares them across the nodes of a host class to find a bad link.
        "metrics": {
            "allreduce_1tok_p50_us": round(one.p50_us, 2),
            "decode_step_allreduce_us": round(step, 1),
        },
    }
    summary = (
        f"{world} ranks, '{topology or 'no'}' profile vs NCCL defaults: 1-token ({one.bytes} B) "
        f"p50 {one.p50_us:.1f} vs {one_d.p50_us:.1f} us, p90 {one.p90_us:.1f} vs {one_d.p90_us:.1f} us; "
        f"decode step ({nl.ALLREDUCES_PER_LAYER * nl.KIMI_K25_LAYERS} all-reduces) {step / 1000:.2f} vs {step_d / 1000:.2f} ms; "
        f"{rows[-1]['bytes'] >> 20} MB p50 ratio {rows[-1]['p50_ratio']}"
    )
    limit = ctx.stack.manifest.validation.thresholds.allreduce_p50_us_max
    status, reason = _latency_verdict(prof + base, one, limit, summary)
    return _r("runtime.nccl_latency", status, reason, evidence, seconds)


def _latency_verdict(
    stats: list[nl.SizeStats], one: nl.SizeStats, limit: float | None, summary: str
) -> tuple[Status, str]:
    """FAIL on a wrong sum at any size, or a 1-token p50 above the manifest's limit."""
    wrong = [s.bytes for s in stats if not s.correct]
    if wrong:
        return "FAIL", f"all-reduce returned wrong sums for sizes {wrong}"
    if limit is not None and one.p50_us > limit:
        return "FAIL", (
            f"1-token all-reduce p50 {one.p50_us:.1f} us exceeds the manifest's "
            f"allreduce_p50_us_max {limit} us; {summary}"
        )
    return "PASS", summary
