"""How many ranks the distributed probes run with: the serving profile's tensor-parallel size.

The NCCL latency probe, symmetric-memory rendezvous and SGLang's eligibility decisions all
change with the rank count (SGLang 0.5.9 refuses custom all-reduce on more than two PCIe-only
GPUs), so a TP-8 stack is probed with 8 processes, not with however many GPUs this host has.
On the gloo backend (STACKGATE_DIST_BACKEND=gloo, CPUs only) the rank count needs no GPUs, so
the orchestration at the profile's size is exercised where there are none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

BACKEND_VAR = "STACKGATE_DIST_BACKEND"


@dataclass(frozen=True)
class RankPlan:
    ranks: int
    backend: str
    profile_tp: int
    # Why the distributed probes do not run at all (None: they run with `ranks` processes).
    skip: str | None = None
    # Set when the run differs from the profile (an explicit --option ranks=N).
    note: str | None = None


def plan_ranks(
    profile_tp: int, gpus: int, env: Mapping[str, str], override: int | None = None
) -> RankPlan:
    """Ranks for the distributed probes: the profile's TP, or `--option ranks=N` when given."""
    backend = env.get(BACKEND_VAR, "nccl")
    note = None
    ranks = profile_tp
    if override is not None:
        ranks = override
        if ranks != profile_tp:
            note = (
                f"{ranks} ranks by --option ranks={ranks}; the serving profile runs TP {profile_tp}"
            )
    if ranks < 2:
        why = (
            f"the serving profile runs TP {profile_tp}: no all-reduce between GPUs to probe"
            if override is None
            else f"--option ranks={ranks}: a collective needs >= 2 ranks"
        )
        return RankPlan(ranks, backend, profile_tp, skip=why, note=note)
    if backend == "nccl" and ranks > gpus:
        return RankPlan(
            ranks,
            backend,
            profile_tp,
            skip=f"{ranks} ranks (TP {profile_tp}) need {ranks} GPUs, this host has {gpus} "
            "(NCCL runs one rank per GPU); --option ranks=N probes at fewer, and says so",
            note=note,
        )
    return RankPlan(ranks, backend, profile_tp, note=note)
