"""The validator groups: their names (what a manifest's `validation.required` may list), the
order they run in (cheapest first), and the module that runs each one.

Adding a group is one entry here plus its module (exposing `run_group(ctx) -> list[Result]`,
a validators.context.GroupRunner) and its tests; the manifest's schema, `--only` choices, the
pipeline and the check-id registry all derive from this list. Modules are named, not
imported: the pipeline imports a group only when it runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

ValidatorGroup = Literal["host", "static", "runtime", "serve-bench"]


@dataclass(frozen=True)
class GroupSpec:
    name: ValidatorGroup
    module: str
    summary: str


GROUPS: tuple[GroupSpec, ...] = (
    GroupSpec("host", "validators.preflight.group", "driver, GPUs, interconnect, memory, nvcc"),
    GroupSpec("static", "validators.static.group", "installed files: pins, lock, ABI, GPU archs"),
    GroupSpec("runtime", "validators.runtime.group", "imports and probes on this host's GPUs"),
    GroupSpec("serve-bench", "validators.serve.group", "serve the model, check output, bench"),
)
ORDER: tuple[ValidatorGroup, ...] = tuple(g.name for g in GROUPS)
MODULES: dict[ValidatorGroup, str] = {g.name: g.module for g in GROUPS}

if sorted(ORDER) != sorted(get_args(ValidatorGroup)):  # pragma: no cover - import-time guard
    raise RuntimeError("stackgate.validator_groups: GROUPS and ValidatorGroup disagree")
