"""The validator groups: their names (what a manifest's `validation.required` may list), the
order they run in (cheapest first), and the module that runs each one.

Adding a group is one entry here plus its module (exposing `run_group(ctx) -> list[Result]`,
a validators.core.context.GroupRunner) and its tests; the manifest's schema, `--only` choices, the
pipeline and the check-id registry all derive from this list, and so does what a group needs
(an environment, the host's GPUs inside an image, a serving profile) and whether its evidence
is the report's host snapshot: the commands ask the entry, they keep no sets of their own.
Modules are named, not imported: the pipeline imports a group only when it runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, get_args

ValidatorGroup = Literal["host", "static", "runtime", "serve-bench"]


@dataclass(frozen=True)
class GroupSpec:
    name: ValidatorGroup
    module: str
    summary: str
    # It judges an environment: with no --env and no built env the run is refused (exit 2).
    needs_env: bool
    # It looks at the host's GPUs: a run inside an image gives the container the GPUs (and so
    # passes over buildah, which cannot); an image run of groups without it needs none.
    needs_gpus: bool
    # Its results' evidence is the report's host snapshot (Report.host).
    host_facts: bool = False
    # A manifest requiring it must name validation.serve_profile.
    needs_serve_profile: bool = False
    # The checks without which the group's question has no answer: one of them SKIPped (no
    # driver, no GPU, nothing to serve) makes the verdict INCOMPLETE, never OK.
    deciding: tuple[str, ...] = ()


GROUPS: tuple[GroupSpec, ...] = (
    GroupSpec(
        "host",
        "validators.preflight.group",
        "driver, GPUs, interconnect, memory, nvcc",
        needs_env=False,
        needs_gpus=True,
        host_facts=True,
        deciding=("host.driver", "host.gpus"),
    ),
    GroupSpec(
        "static",
        "validators.static.group",
        "installed files: pins, lock, ABI, GPU archs",
        needs_env=True,
        needs_gpus=False,
    ),
    GroupSpec(
        "runtime",
        "validators.runtime.group",
        "imports and probes on this host's GPUs",
        needs_env=True,
        needs_gpus=True,
        deciding=("runtime.gpu",),
    ),
    GroupSpec(
        "serve-bench",
        "validators.serve.group",
        "serve the model, check output, bench",
        needs_env=True,
        needs_gpus=True,
        needs_serve_profile=True,
        deciding=("serve-bench.launch",),
    ),
)
ORDER: tuple[ValidatorGroup, ...] = tuple(g.name for g in GROUPS)
SPECS: dict[ValidatorGroup, GroupSpec] = {g.name: g for g in GROUPS}
MODULES: dict[ValidatorGroup, str] = {g.name: g.module for g in GROUPS}


def specs(groups: Iterable[str]) -> list[GroupSpec]:
    """The entries of the named groups, in run order (unknown names are not groups)."""
    wanted = set(groups)
    return [g for g in GROUPS if g.name in wanted]


def need_env(groups: Iterable[str]) -> list[ValidatorGroup]:
    """The groups of `groups` that judge an environment."""
    return [g.name for g in specs(groups) if g.needs_env]


def need_gpus(groups: Iterable[str]) -> bool:
    """Whether any group of `groups` looks at the host's GPUs."""
    return any(g.needs_gpus for g in specs(groups))


if sorted(ORDER) != sorted(get_args(ValidatorGroup)):  # pragma: no cover - import-time guard
    raise RuntimeError("stackgate.validator_groups: GROUPS and ValidatorGroup disagree")
