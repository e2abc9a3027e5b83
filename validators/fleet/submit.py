"""`fleet submit`: the spec from the command line, the job folder, and the scheduler's jobs.

Paths the nodes read (wheelhouse, jobs root, checkout, store) are made absolute here: the
scheduler runs the steps elsewhere, from another working directory.
"""

from __future__ import annotations

import argparse
import json
import logging
import secrets
import shutil
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from stackgate.errors import BadInput, EnvironmentProblem, StackgateError
from stackgate.files import atomic_write_text
from stackgate.loading import load_stack
from stackgate.model import validation_problems
from stackgate.paths import project_root
from stackgate.proc import run
from validators.fleet import kube, slurm
from validators.fleet.elements import SUBMISSION_FILENAME
from validators.fleet.spec import SPEC_FILENAME, FleetSpec, KubeOptions, SlurmOptions, expand_nodes

log = logging.getLogger("stackgate.fleet")

SCRIPTS_DIR = "slurm"
KUBE_CHECKOUT = "/opt/stackgate"  # fleet/kubernetes/Containerfile
KUBE_PYTHON = f"{KUBE_CHECKOUT}/.venv/bin/python"
MANIFEST_FILENAME = "kubernetes.json"


def _absolute(path: str) -> str:
    return str(Path(path).expanduser().absolute())


def spec_from_args(args: argparse.Namespace) -> FleetSpec:
    loaded = load_stack(args.stack)
    name = loaded.manifest.name
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    fleet_id = args.fleet_id or f"{name}-{stamp}-{secrets.token_hex(3)}"
    kubernetes = args.scheduler == "kubernetes"
    if not kubernetes and not Path(args.wheelhouse).is_dir():
        raise BadInput(f"--wheelhouse {args.wheelhouse}: no such folder")
    # On Kubernetes the paths are the pods' (the claim's mount), not this machine's.
    place = (lambda p: p) if kubernetes else _absolute
    stack = args.stack if kubernetes or not Path(args.stack).is_file() else _absolute(args.stack)
    try:
        return FleetSpec(
            fleet_id=fleet_id,
            stack=stack,
            stack_name=name,
            wheelhouse=place(args.wheelhouse),
            nodes=expand_nodes(args.nodes),
            job_dir=str(Path(place(args.jobs_root)) / fleet_id),
            # In a pod the checkout is the image's (fleet/kubernetes/Containerfile), never
            # this machine's path.
            checkout=place(args.checkout or (KUBE_CHECKOUT if kubernetes else str(project_root()))),
            python=args.python or (KUBE_PYTHON if kubernetes else sys.executable),
            build_python=args.build_python,
            local_root=args.local_root,
            runs=args.runs,
            only=args.only or [],
            options=args.option,
            allow_host_mismatch=args.allow_host_mismatch,
            store=place(args.store) if args.store else None,
            scheduler=args.scheduler,
            slurm=SlurmOptions(
                partition=args.partition,
                collect_partition=args.collect_partition,
                time=args.time,
                gres=args.gres,
                account=args.account,
                throttle=args.throttle,
                pin=not args.no_pin,
            ),
            kubernetes=KubeOptions(
                image=args.image,
                namespace=args.namespace,
                gpus=args.gpus,
                claim=args.claim,
                claim_mount=args.claim_mount,
                host_path=args.host_path,
                parallelism=args.throttle,
                node_deadline_s=args.node_deadline,
                priority_class=args.priority_class,
            )
            if kubernetes and args.image
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
    """Slurm with pinning: leave out the nodes Slurm would not start a job on (slurm.py says
    why an element pinned to one would hold back the others). A dry run where Slurm cannot
    be asked prints the plan for every node."""
    if spec.scheduler != "slurm" or not spec.slurm.pin:
        return spec
    try:
        skipped = slurm.probe_unavailable(spec.nodes)
    except StackgateError as exc:
        if dry_run:  # printing the plan needs no cluster; the real submit asks again
            log.warning("node states not checked (%s): every node is in the plan", exc.message)
            return spec
        raise
    if len(skipped) == len(spec.nodes):
        raise EnvironmentProblem(
            "no node of the set is available to Slurm",
            details=[f"{n}: {why}" for n, why in skipped.items()],
        )
    return spec.model_copy(update={"skipped": skipped})


def slurm_array_limit() -> int:
    """Slurm's MaxArraySize where Slurm answers; its default where not (a dry run elsewhere)."""
    try:
        return slurm.max_array_size()
    except StackgateError:
        return slurm.DEFAULT_MAX_ARRAY_SIZE


def plan(spec: FleetSpec, *, max_array: int = slurm.DEFAULT_MAX_ARRAY_SIZE) -> Plan:
    files = {SPEC_FILENAME: spec.to_json()}
    if spec.scheduler == "slurm":
        for name, text in slurm.render(spec).items():
            files[f"{SCRIPTS_DIR}/{name}"] = text
        commands = slurm.plan_commands(spec, spec.folder / SCRIPTS_DIR, max_array=max_array)
    else:
        if spec.kubernetes is None:
            raise BadInput("--scheduler kubernetes needs --image (the stackgate image)")
        doc = kube.as_list(kube.manifests(spec))
        files[MANIFEST_FILENAME] = json.dumps(doc, indent=2) + "\n"
        commands = [["kubectl", "apply", "-f", str(spec.folder / MANIFEST_FILENAME)]]
    return Plan(spec, files, commands)


def execute(planned: Plan) -> dict[str, Any]:
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
        if planned.spec.scheduler == "slurm":
            submitted = _submit_slurm(planned, partial)
        else:
            _finish_folder(
                partial, folder, {"scheduler": "kubernetes", "commands": planned.commands}
            )
            for argv in planned.commands:
                run(argv)
            submitted = {"scheduler": "kubernetes", "commands": planned.commands}
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return submitted


def _submit_slurm(planned: Plan, partial: Path) -> dict[str, Any]:
    folder = planned.spec.folder
    record: dict[str, Any] = {}

    def finish(done: slurm.Submitted) -> None:
        # The scripts were read by sbatch from the partial folder; say where they live now.
        commands = [[a.replace(str(partial), str(folder)) for a in argv] for argv in done.commands]
        record.update(
            scheduler="slurm",
            arrays=done.arrays,
            offsets=done.offsets,
            max_array_size=done.max_array_size,
            collector_job=done.collector_job,
            commands=commands,
        )
        _finish_folder(partial, folder, record)

    try:
        done = slurm.submit(planned.spec, partial / SCRIPTS_DIR, before_release=finish)
    except BaseException:
        if not partial.exists() and folder.exists():  # renamed, then the release failed
            shutil.rmtree(folder, ignore_errors=True)
        raise
    release = [a.replace(str(partial), str(folder)) for a in done.commands[-1]]
    record["commands"].append(release)
    atomic_write_text(folder / SUBMISSION_FILENAME, json.dumps(record, indent=2) + "\n")
    return record


def _finish_folder(partial: Path, folder: Path, submitted: dict[str, Any]) -> None:
    """submission.json, then the rename that makes the job folder exist (refused if taken)."""
    (partial / SUBMISSION_FILENAME).write_text(json.dumps(submitted, indent=2) + "\n", "utf-8")
    try:
        partial.rename(folder)  # an empty folder in the way would be replaced: checked before
    except OSError as exc:
        raise BadInput(f"{folder}: cannot make the job folder: {exc.strerror or exc}") from None
