"""What a stack's required validators cannot decide on a host without a GPU, known before
anything runs: mark-good, gate, report and reproduce refuse up front (exit 3) instead of
running the validators N times to refuse for a reason known at the start."""

from __future__ import annotations

from stackgate.engines import ENGINES
from stackgate.errors import HostCannot
from stackgate.host.snapshot import host_snapshot
from stackgate.manifest import Manifest
from stackgate.validator_groups import specs


def gpu_deciding(manifest: Manifest) -> list[str]:
    """The deciding checks of the manifest's required groups that need this host's GPUs (a
    serving engine that loads nothing onto GPUs needs none); findings the stack accepts are
    left out."""
    accepted = manifest.validation.accepted_findings
    profile = manifest.serving.get(manifest.validation.serve_profile or "")
    out: list[str] = []
    for spec in specs(manifest.validation.required):
        if not spec.needs_gpus:
            continue
        if spec.needs_serve_profile and (
            profile is None or not ENGINES[profile.engine].loads_onto_gpus
        ):
            continue
        out += [check for check in spec.deciding if check not in accepted]
    return out


def no_gpu_for(manifest: Manifest) -> str | None:
    """Why this host cannot decide the manifest's required checks (no GPU), None when it has
    GPUs or the stack needs none."""
    needs = gpu_deciding(manifest)
    if not needs:
        return None
    gpus = host_snapshot().gpus
    inventory = gpus.value
    if inventory is not None and inventory.gpus:
        return None
    why = gpus.reason or "the driver reports no GPU"
    return (
        f"no GPU on this host ({why}): {', '.join(needs)} cannot be decided here; "
        f"{manifest.name}'s validation.required needs them"
    )


def refuse_without_gpus(manifest: Manifest, command: str) -> None:
    """HostCannot (exit 3, REFUSED) before `command` runs any validator on a host that cannot
    decide the stack's required checks."""
    why = no_gpu_for(manifest)
    if why is not None:
        raise HostCannot(
            why,
            details=[
                f"run {command} on a host with the GPUs the stack targets "
                f"({', '.join(manifest.host.target_archs)}), or give it the reports of runs "
                "made there (--run RESULT.json)",
            ],
        )
