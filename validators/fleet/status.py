"""What one node says about itself: `<job-dir>/nodes/<node>/status.json`, written last.

The node step claims its attempt first (`attempt-<n>.json`, created exclusively), writes its
run reports and (when mark-good accepts) its record, then this file, atomically; a node without
it is MISSING in the verdict, whatever else it left behind.

Everything in the job folder is untrusted input (a shared folder every node can write): a
status file is read bounded and typed, one node at a time, and a bad one is that node's
problem (`NodeFiles.problem`, naming the file), never the fleet's.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from stackgate.errors import BadInput
from stackgate.files import atomic_write_text, read_json_file
from stackgate.model import StrictModel, validation_problems

Phase = Literal["build", "validate", "mark-good", "done"]
NodeOutcome = Literal["PASS", "FAIL"]

NODES_DIR = "nodes"
RECORDS_DIR = "records"
STATUS_FILENAME = "status.json"
TREE_LISTING = "tree.tsv.gz"
_ATTEMPT = re.compile(r"^attempt-(\d{1,6})\.json\Z")


class FailedCheck(StrictModel):
    check: str
    status: str
    reason: str
    runs: int = Field(default=1, description="in how many of the node's runs it was not PASS")


class NodeStatus(StrictModel):
    schema_version: Literal[1] = 1
    fleet_id: str
    node: str
    index: int | None = Field(default=None, description="the array element / completion index")
    outcome: NodeOutcome
    phase: Phase = Field(description="the step that decided: where it stopped, or done")
    exit_code: int
    reasons: list[str] = Field(default_factory=list)
    failed_checks: list[FailedCheck] = Field(default_factory=list)
    record_id: str | None = None
    record_file: str | None = Field(default=None, description="relative to the job folder")
    env: str | None = None
    runs: int = 0
    seconds: dict[str, float] = Field(default_factory=dict)
    scheduler_job: str | None = Field(default=None, description="e.g. Slurm's 12_3")
    attempt: int = Field(default=0, ge=0, description="which attempt of this node wrote it")


class Attempt(StrictModel):
    """`nodes/<node>/attempt-<n>.json`: one per start of the node step, created exclusively."""

    node: str
    attempt: int
    scheduler_job: str | None = None
    restart_count: int = Field(default=0, description="Slurm's SLURM_RESTART_COUNT")
    pid: int


def node_dir(job_dir: Path, node: str) -> Path:
    return job_dir / NODES_DIR / node


def write_status(job_dir: Path, status: NodeStatus) -> Path:
    target = node_dir(job_dir, status.node) / STATUS_FILENAME
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, json.dumps(status.model_dump(mode="json"), indent=2) + "\n")
    return target


def claim_attempt(job_dir: Path, node: str, scheduler_job: str | None, restarts: int) -> Attempt:
    """Claim the next attempt number of this node (O_EXCL: two starts never share one)."""
    folder = node_dir(job_dir, node)
    folder.mkdir(parents=True, exist_ok=True)
    number = 0
    while True:
        claim = Attempt(
            node=node,
            attempt=number,
            scheduler_job=scheduler_job,
            restart_count=restarts,
            pid=os.getpid(),
        )
        path = folder / f"attempt-{number}.json"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except FileExistsError:
            number += 1
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(claim.model_dump(mode="json")) + "\n")
        return claim


_MAX_STATUS_BYTES = 16 << 20


@dataclass
class NodeFiles:
    """What one node's folder holds: its status (when it reads back), or why it does not."""

    node: str
    status: NodeStatus | None = None
    problem: str | None = None
    attempts: list[int] = field(default_factory=list)


def read_node(job_dir: Path, node: str) -> NodeFiles:
    """One node's status and attempt claims; O(1) in the fleet size."""
    folder = node_dir(job_dir, node)
    out = NodeFiles(node)
    try:
        names = [entry.name for entry in folder.iterdir()]
    except FileNotFoundError:
        return out
    except OSError as exc:
        out.problem = f"{folder}: cannot list the node's folder: {exc.strerror or exc}"
        return out
    out.attempts = sorted(int(m[1]) for m in map(_ATTEMPT.match, names) if m)
    if STATUS_FILENAME not in names:
        return out
    path = folder / STATUS_FILENAME
    try:
        out.status = NodeStatus.model_validate(read_json_file(path, _MAX_STATUS_BYTES))
    except BadInput as exc:
        out.problem = "; ".join(exc.lines())
    except ValidationError as exc:
        out.problem = f"{path}: not a node status: " + "; ".join(validation_problems(exc)[:3])
    return out


def reported_nodes(job_dir: Path) -> list[str]:
    """Names of the node folders under nodes/ (one listing of one folder)."""
    try:
        return sorted(entry.name for entry in (job_dir / NODES_DIR).iterdir())
    except OSError:
        return []


def status_summary(files: NodeFiles) -> dict[str, Any]:
    """What `fleet status` prints for a node."""
    if files.problem:
        return {"reported": "UNREADABLE", "phase": None, "problem": files.problem}
    if files.status is None:
        return {"reported": None, "phase": None}
    return {"reported": files.status.outcome, "phase": files.status.phase}
