"""Every check id a validator can emit: the registry the gate, reports and tests name ids from.

`make_result` (validators.results) refuses an id that is not here, so a validator cannot emit
an unregistered id, and tests/validators/test_check_ids.py fails when a test or fixture names
an id no validator can emit (ids used to drift: the gate tests asserted on
`runtime.flashinfer.jit`, the runtime group emits `runtime.flashinfer_jit`).

Exact ids are listed per group; families are a prefix plus one name the validator derives at
run time (a rule id of stacks/rules.toml, a distribution's key).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from stackgate.validator_groups import ORDER, ValidatorGroup


@dataclass(frozen=True)
class CheckFamily:
    prefix: str
    group: ValidatorGroup
    what: str


EXACT: dict[str, ValidatorGroup] = {
    **{
        f"host.{n}": "host"
        for n in ("driver", "gpus", "interconnect", "p2p", "memory", "disk", "nvcc", "rules")
    },
    **{
        f"static.{n}": "static"
        for n in (
            "env",
            "dists.pins",
            "dists.lock",
            "dists.requirements",
            "abi.summary",
            "abi.unreadable",
            "arch",
            "lock.fetch",  # validators static --lock (validators/lockcheck)
            "lock.integrity",
            "lock.wheels",  # a locked wheel that is not a readable wheel (exit 2)
        )
    },
    **{
        f"runtime.{n}": "runtime"
        for n in (
            "env",
            "gpu",
            "torch",
            "torch_cuda",
            "sgl_kernel",
            "flashinfer",
            "sglang",
            "flashinfer_jit",
            "flashinfer_jit.device_arch",
            "flashinfer_fusion_arch",
            "symm_mem",
            "nccl_latency",
            "sglang.torch_symm_mem",
            "sglang.custom_allreduce",
            "sglang.allreduce_fusion",
        )
    },
    **{
        f"serve-bench.{n}": "serve-bench"
        for n in (
            "launch",
            "ready",
            "serving",
            "teardown",
            "correctness.greedy",
            "correctness.arithmetic",
            "single_stream",
            "sweep",
        )
    },
    # The pipeline's own results for a group that could not be imported or crashed.
    **{f"{g}.available": g for g in ORDER},
    **{f"{g}.crashed": g for g in ORDER},
}

FAMILIES: tuple[CheckFamily, ...] = (
    CheckFamily("host.rule.", "host", "a host rule of stacks/rules.toml fired (its id)"),
    CheckFamily("static.abi.", "static", "ABI check of one distribution (its key)"),
    CheckFamily("static.arch.", "static", "GPU arch coverage of one distribution (its key)"),
)

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")


def family_of(check: str) -> CheckFamily | None:
    for family in FAMILIES:
        if check.startswith(family.prefix) and _NAME.fullmatch(check[len(family.prefix) :]):
            return family
    return None


def is_known(check: str) -> bool:
    """An id some validator can emit (exactly, or as a member of a family)."""
    return check in EXACT or family_of(check) is not None


def group_of(check: str) -> ValidatorGroup | None:
    if check in EXACT:
        return EXACT[check]
    family = family_of(check)
    return family.group if family else None
