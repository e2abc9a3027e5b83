"""What one node says about itself: `<job-dir>/nodes/<node>/status.json`, written last.

The node step claims its attempt (`attempt-<n>.json`, created exclusively), writes its run
reports and (when mark-good accepts) its record, then this file, atomically; a node without it
is MISSING. The job folder is untrusted (every node can write it): a status file is read bounded
and typed, and a bad one is that node's problem (`NodeFiles.problem`, naming the file).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from stackgate import dirfd
from stackgate.errors import BadInput, EnvironmentProblem
from stackgate.files import parse_json_text
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


def open_node_dir(job_dir: Path, node: str) -> int:
    """`nodes/<node>` opened (made when missing) from the job folder, no component followed
    when a symlink: another node swapping its own or this node's folder for a link to
    /etc gets a refusal, never a write there (dirfd.open_tree)."""
    if "/" in node or node in ("", ".", ".."):
        raise BadInput(f"node name {node!r}: not one folder name")
    return dirfd.open_tree(job_dir, Path(NODES_DIR) / node, create=True)


def write_status(job_dir: Path, status: NodeStatus) -> Path:
    target = node_dir(job_dir, status.node) / STATUS_FILENAME
    data = (json.dumps(status.model_dump(mode="json"), indent=2) + "\n").encode()
    with dirfd.opened(open_node_dir(job_dir, status.node)) as folder:
        dirfd.write_at(folder, STATUS_FILENAME, data)
    return target


def claim_attempt(job_dir: Path, node: str, scheduler_job: str | None, restarts: int) -> Attempt:
    """Claim the next attempt number of this node (O_EXCL: two starts never share one)."""
    number = 0
    with dirfd.opened(open_node_dir(job_dir, node)) as folder:
        while True:
            claim = Attempt(
                node=node,
                attempt=number,
                scheduler_job=scheduler_job,
                restart_count=restarts,
                pid=os.getpid(),
            )
            data = (json.dumps(claim.model_dump(mode="json")) + "\n").encode()
            if dirfd.create_exclusive_at(folder, f"attempt-{number}.json", data):
                return claim
            number += 1


_MAX_STATUS_BYTES = 16 << 20


@dataclass
class NodeFiles:
    """What one node's folder holds: its status (when it reads back), or why it does not."""

    node: str
    status: NodeStatus | None = None
    problem: str | None = None
    attempts: list[int] = field(default_factory=list)


def read_node(job_dir: Path, node: str) -> NodeFiles:
    """One node's status and attempt claims; O(1) in the fleet size. The folder and the
    file are reached without following a symlink (a node's folder or status.json made a link
    to /etc/shadow is that node's problem, never read)."""
    folder = node_dir(job_dir, node)
    out = NodeFiles(node)
    try:
        fd = dirfd.open_tree(job_dir, Path(NODES_DIR) / node)
    except EnvironmentProblem as exc:
        if not folder.exists() and not folder.is_symlink():
            return out
        out.problem = f"{folder}: cannot open the node's folder: {exc.message}"
        return out
    with dirfd.opened(fd):
        try:
            names = os.listdir(fd)  # noqa: PTH208 - listing the opened folder, not a path
        except OSError as exc:
            out.problem = f"{folder}: cannot list the node's folder: {exc.strerror or exc}"
            return out
    out.attempts = sorted(int(m[1]) for m in map(_ATTEMPT.match, names) if m)
    if STATUS_FILENAME not in names:
        return out
    path = folder / STATUS_FILENAME
    try:
        raw = dirfd.read_bytes_under(
            job_dir, Path(NODES_DIR) / node / STATUS_FILENAME, _MAX_STATUS_BYTES
        )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadInput(f"{path}: not UTF-8 text (byte {exc.start})") from None
        out.status = NodeStatus.model_validate(parse_json_text(text, where=str(path)))
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
