"""`fleet submit`: the spec from a typed request, the job folder, and the scheduler's jobs
(validators.fleet.schedulers: what differs between Slurm and Kubernetes is there).

Paths the nodes read (wheelhouse, jobs root, checkout, store) are made absolute here where
the scheduler's paths are this machine's: it runs the steps elsewhere, from another working
directory.
"""

from __future__ import annotations

import secrets
import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from stackgate.errors import BadInput
from stackgate.manifest.loading import load_stack
from stackgate.model import validation_problems
from validators.fleet.elements import SUBMISSION_FILENAME, Submission
from validators.fleet.schedulers import SCHEDULERS, scheduler_of
from validators.fleet.slurm.limits import DEFAULT_MAX_ARRAY_SIZE
from validators.fleet.slurm.options import PinWith, SlurmOptions
from validators.fleet.spec import (
    NON_ROOT_UID,
    SPEC_FILENAME,
    FleetSpec,
    KubeOptions,
    SchedulerName,
)
from validators.gate.policy import DEFAULT_REPEATS


@dataclass(frozen=True)
class SubmitRequest:
    """What `fleet submit` was asked, typed (the command module builds it from its flags)."""

    stack: str
    wheelhouse: str
    nodes: list[str]  # as given: `a,b` or `gpu[01-16]` items, expanded here
    jobs_root: str
    local_root: str = "/var/tmp/stackgate"
    runs: int = DEFAULT_REPEATS
    only: list[str] = field(default_factory=list)
    options: list[str] = field(default_factory=list)
    allow_host_mismatch: bool = False
    store: str | None = None
    checkout: str | None = None
    python: str | None = None
    build_python: str | None = None
    fleet_id: str | None = None
    scheduler: SchedulerName = "slurm"
    throttle: int | None = None
    partition: str | None = None
    collect_partition: str | None = None
    time: str | None = None
    gres: str | None = None
    account: str | None = None
    pin: bool = True
    pin_with: PinWith = "auto"
    cc: str | None = None
    image: str | None = None
    namespace: str = "default"
    gpus: int = 8
    claim: str = "stackgate-fleet"
    claim_mount: str = "/fleet"
    host_path: str = "/var/lib/stackgate"
    node_deadline_s: int = 6 * 3600
    priority_class: str | None = None
    run_as_user: int = NON_ROOT_UID


def _absolute(path: str) -> str:
    return str(Path(path).expanduser().absolute())


def spec_from_request(req: SubmitRequest) -> FleetSpec:
    loaded = load_stack(req.stack)
    name = loaded.manifest.name
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    fleet_id = req.fleet_id or f"{name}-{stamp}-{secrets.token_hex(3)}"
    scheduler = SCHEDULERS[req.scheduler]
    local = scheduler.local_paths
    if local and not Path(req.wheelhouse).is_dir():
        raise BadInput(f"--wheelhouse {req.wheelhouse}: no such folder")
    place = _absolute if local else (lambda p: p)
    stack = _absolute(req.stack) if local and Path(req.stack).is_file() else req.stack
    try:
        return FleetSpec(
            fleet_id=fleet_id,
            stack=stack,
            stack_name=name,
            wheelhouse=place(req.wheelhouse),
            nodes=scheduler.node_names(req.nodes),
            job_dir=str(Path(place(req.jobs_root)) / fleet_id),
            checkout=place(req.checkout or scheduler.default_checkout()),
            python=req.python or scheduler.default_python(),
            build_python=req.build_python,
            local_root=req.local_root,
            runs=req.runs,
            only=req.only,
            options=req.options,
            allow_host_mismatch=req.allow_host_mismatch,
            store=place(req.store) if req.store else None,
            scheduler=req.scheduler,
            slurm=SlurmOptions(
                partition=req.partition,
                collect_partition=req.collect_partition,
                time=req.time,
                gres=req.gres,
                account=req.account,
                throttle=req.throttle,
                pin=req.pin,
                pin_with=req.pin_with,
                cc=req.cc,
            ),
            kubernetes=KubeOptions(
                image=req.image,
                namespace=req.namespace,
                gpus=req.gpus,
                claim=req.claim,
                claim_mount=req.claim_mount,
                host_path=req.host_path,
                parallelism=req.throttle,
                node_deadline_s=req.node_deadline_s,
                priority_class=req.priority_class,
                run_as_user=req.run_as_user,
            )
            if req.scheduler == "kubernetes" and req.image
            else None,
        )
    except ValidationError as exc:
        raise BadInput("invalid fleet submission", details=validation_problems(exc)) from None


@dataclass(frozen=True)
class Plan:
    """Everything submit would write and run, so --dry-run can print exactly that."""

    spec: FleetSpec
    files: dict[str, str]  # relative to the job folder -> content
    commands: list[list[str]]

    def as_json(self) -> dict[str, Any]:
        return {
            "fleet_id": self.spec.fleet_id,
            "job_dir": self.spec.job_dir,
            "files": self.files,
            "commands": self.commands,
        }


def with_available_nodes(spec: FleetSpec, *, dry_run: bool) -> FleetSpec:
    """The spec without the nodes its scheduler would not start an element on."""
    return scheduler_of(spec).with_available_nodes(spec, dry_run=dry_run)


def plan(spec: FleetSpec, *, max_array: int = DEFAULT_MAX_ARRAY_SIZE) -> Plan:
    files, commands = scheduler_of(spec).plan(spec, max_array)
    return Plan(spec, {SPEC_FILENAME: spec.to_json(), **files}, commands)


def execute(planned: Plan) -> Submission:
    """Write the job folder and submit, all or nothing; returns what submission.json records.

    The folder is written as `.<fleet-id>.partial-<random>` beside its final place and renamed
    into place only once every job is submitted (held) and submission.json is in it; then the
    arrays are released. A failure before that cancels what was submitted and removes the
    partial folder: no half-written job folder, and the same --fleet-id can be retried.
    """
    folder = planned.spec.folder
    if folder.exists() or folder.is_symlink():
        raise BadInput(f"{folder}: the job folder exists already (give another --fleet-id)")
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = folder.with_name(f".{folder.name}.partial-{secrets.token_hex(4)}")
    (partial / "logs").mkdir(parents=True)
    try:
        for rel, text in planned.files.items():
            target = partial / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        submitted = scheduler_of(planned.spec).submit(
            planned.spec,
            planned.commands,
            partial,
            lambda record: _finish_folder(partial, folder, record),
        )
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return submitted


def _finish_folder(partial: Path, folder: Path, submitted: Submission) -> None:
    """submission.json, then the rename that makes the job folder exist (refused if taken)."""
    (partial / SUBMISSION_FILENAME).write_text(submitted.to_json(), "utf-8")
    try:
        partial.rename(folder)  # an empty folder in the way would be replaced: checked before
    except OSError as exc:
        raise BadInput(f"{folder}: cannot make the job folder: {exc.strerror or exc}") from None
