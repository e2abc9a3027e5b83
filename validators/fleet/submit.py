"""`fleet submit`: the spec from the command line, the job folder, and the scheduler's jobs.

Paths the nodes read (wheelhouse, jobs root, checkout, store) are made absolute here: the
scheduler runs the steps elsewhere, from another working directory.
"""

from __future__ import annotations

import argparse
import json
import logging
import secrets
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from stackgate.errors import BadInput, EnvironmentProblem, StackgateError
from stackgate.loading import load_stack
from stackgate.model import validation_problems
from stackgate.paths import project_root
from stackgate.proc import run
from validators.fleet import kube, slurm
from validators.fleet.spec import SPEC_FILENAME, FleetSpec, KubeOptions, SlurmOptions, expand_nodes

log = logging.getLogger("stackgate.fleet")

SUBMISSION_FILENAME = "submission.json"
SCRIPTS_DIR = "slurm"
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
            checkout=place(args.checkout or str(project_root())),
            python=args.python or ("python3" if kubernetes else sys.executable),
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


def plan(spec: FleetSpec) -> Plan:
    files = {SPEC_FILENAME: spec.to_json()}
    if spec.scheduler == "slurm":
        for name, text in slurm.render(spec).items():
            files[f"{SCRIPTS_DIR}/{name}"] = text
        commands = slurm.plan_commands(spec, spec.folder / SCRIPTS_DIR)
    else:
        if spec.kubernetes is None:
            raise BadInput("--scheduler kubernetes needs --image (the stackgate image)")
        doc = kube.as_list(kube.manifests(spec))
        files[MANIFEST_FILENAME] = json.dumps(doc, indent=2) + "\n"
        commands = [["kubectl", "apply", "-f", str(spec.folder / MANIFEST_FILENAME)]]
    return Plan(spec, files, commands)


def execute(planned: Plan) -> dict[str, Any]:
    """Write the job folder, then submit; returns what submission.json records."""
    folder = planned.spec.folder
    if folder.exists():
        raise BadInput(f"{folder}: the job folder exists already (give another --fleet-id)")
    (folder / "logs").mkdir(parents=True)
    for rel, text in planned.files.items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    submitted: dict[str, Any]
    if planned.spec.scheduler == "slurm":
        done = slurm.submit(planned.spec, folder / SCRIPTS_DIR)
        submitted = {
            "scheduler": "slurm",
            "array_job": done.array_job,
            "collector_job": done.collector_job,
            "commands": done.commands,
        }
    else:
        for argv in planned.commands:
            run(argv)
        submitted = {"scheduler": "kubernetes", "commands": planned.commands}
    (folder / SUBMISSION_FILENAME).write_text(json.dumps(submitted, indent=2) + "\n", "utf-8")
    return submitted


def read_submission(job_dir: Path) -> dict[str, Any]:
    path = job_dir / SUBMISSION_FILENAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
