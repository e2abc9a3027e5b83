"""Every check id a validator can emit: the registry the gate, reports and tests name ids from.

`make_result` (validators.core.results) refuses an id that is not here, and
tests/validators/test_check_ids.py fails when a test or fixture names an id no validator can
emit (ids drift otherwise).

Exact ids are listed per group; families are a prefix plus one name the validator derives at
run time (a rule id of stacks/rules.toml, a distribution's key).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, NewType, cast, get_args

from stackgate.validator_groups import ORDER, ValidatorGroup


@dataclass(frozen=True)
class CheckFamily:
    prefix: str
    group: ValidatorGroup
    what: str


# The ids each group emits, one Literal per group: a group's result factory takes its own
# group's ids, so mypy refuses an id no group registers (`runtime.flashinfer.jit` where the
# runtime group emits `runtime.flashinfer_jit`).
HostCheck = Literal[
    "host.driver",
    "host.gpus",
    "host.interconnect",
    "host.p2p",
    "host.memory",
    "host.disk",
    "host.nvcc",
    "host.rules",
]
StaticCheck = Literal[
    "static.env",
    "static.dists.pins",
    "static.dists.lock",
    "static.dists.requirements",
    "static.dists.clashes",  # files several distributions install (static/file_clashes.py)
    "static.abi.summary",
    "static.abi.unreadable",
    "static.arch",
    "static.lock.fetch",  # validators static --lock (validators/lockcheck)
    "static.lock.integrity",
    "static.lock.origin",  # the lock's files from the manifest's indexes (lockcheck/origin.py)
    "static.lock.wheels",  # a locked wheel that is not a readable wheel (exit 2)
]
RuntimeCheck = Literal[
    "runtime.env",
    "runtime.gpu",
    "runtime.torch",
    "runtime.torch_cuda",
    "runtime.sgl_kernel",
    "runtime.flashinfer",
    "runtime.sglang",
    "runtime.flashinfer_jit",
    "runtime.flashinfer_jit.device_arch",
    "runtime.flashinfer_fusion_arch",
    "runtime.symm_mem",
    "runtime.nccl_latency",
    "runtime.sglang.torch_symm_mem",
    "runtime.sglang.custom_allreduce",
    "runtime.sglang.allreduce_fusion",
]
ServeBenchCheck = Literal[
    "serve-bench.launch",
    "serve-bench.ready",
    "serve-bench.serving",
    "serve-bench.teardown",
    "serve-bench.correctness.greedy",
    "serve-bench.correctness.arithmetic",
    "serve-bench.single_stream",
    "serve-bench.sweep",
    "serve-bench.token_counts",
]
# The pipeline's own results for a group that could not be imported or crashed.
PipelineCheck = Literal[
    "host.available",
    "host.crashed",
    "static.available",
    "static.crashed",
    "runtime.available",
    "runtime.crashed",
    "serve-bench.available",
    "serve-bench.crashed",
]
CheckId = HostCheck | StaticCheck | RuntimeCheck | ServeBenchCheck | PipelineCheck
# A member of a family (below): its prefix and one name derived at run time, made by family_id.
FamilyId = NewType("FamilyId", str)

GROUP_CHECKS: dict[ValidatorGroup, tuple[str, ...]] = {
    "host": get_args(HostCheck),
    "static": get_args(StaticCheck),
    "runtime": get_args(RuntimeCheck),
    "serve-bench": get_args(ServeBenchCheck),
}
EXACT: dict[str, ValidatorGroup] = {
    **{check: group for group, checks in GROUP_CHECKS.items() for check in checks},
    **{f"{group}.{what}": group for group in ORDER for what in ("available", "crashed")},
}

HOST_RULE = CheckFamily("host.rule.", "host", "a host rule of stacks/rules.toml fired (its id)")
STATIC_ABI = CheckFamily("static.abi.", "static", "ABI check of one distribution (its key)")
STATIC_ARCH = CheckFamily(
    "static.arch.", "static", "GPU arch coverage of one distribution (its key)"
)
FAMILIES: tuple[CheckFamily, ...] = (HOST_RULE, STATIC_ABI, STATIC_ARCH)

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")


def family_id(family: CheckFamily, name: str) -> FamilyId:
    """`family`'s id for `name` (a rule id, a distribution's key); ValueError for a name that
    is not one (empty, or characters an id cannot hold)."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"{name!r} cannot name a member of {family.prefix}*")
    return FamilyId(family.prefix + name)


def available_check(group: ValidatorGroup) -> PipelineCheck:
    """The pipeline's id for a group it could not import."""
    return cast(PipelineCheck, f"{group}.available")


def crashed_check(group: ValidatorGroup) -> PipelineCheck:
    """The pipeline's id for a group that raised."""
    return cast(PipelineCheck, f"{group}.crashed")


def family_of(check: str) -> CheckFamily | None:
    for family in FAMILIES:
        if check.startswith(family.prefix) and _NAME.fullmatch(check[len(family.prefix) :]):
            return family
    return None


def is_known(check: str) -> bool:
    """An id some validator can emit (exactly, or as a member of a family)."""
    return check in EXACT or family_of(check) is not None


def _check_registry() -> None:
    """Import-time guard: every group has its Literal, and every id starts with its group."""
    if sorted(GROUP_CHECKS) != sorted(ORDER):  # pragma: no cover - import-time guard
        raise RuntimeError("validators.core.checks: GROUP_CHECKS and the validator groups disagree")
    pipeline = {f"{g}.{what}" for g in ORDER for what in ("available", "crashed")}
    if pipeline != set(get_args(PipelineCheck)):  # pragma: no cover - import-time guard
        raise RuntimeError("validators.core.checks: PipelineCheck misses a group's own ids")
    for check, group in EXACT.items():
        if not check.startswith(f"{group}."):  # pragma: no cover - import-time guard
            raise RuntimeError(f"validators.core.checks: {check} is not under {group}.")


_check_registry()
