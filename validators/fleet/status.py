"""What one node says about itself: `<job-dir>/nodes/<node>/status.json`, written last.

The node step writes its run reports and (when mark-good accepts) its record first, then this
file, atomically; a node without it is MISSING in the verdict, whatever else it left behind.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from stackgate.errors import BadInput
from stackgate.files import read_json_file
from stackgate.model import StrictModel

Phase = Literal["build", "validate", "mark-good", "done"]
NodeOutcome = Literal["PASS", "FAIL"]

NODES_DIR = "nodes"
RECORDS_DIR = "records"
STATUS_FILENAME = "status.json"


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


def node_dir(job_dir: Path, node: str) -> Path:
    return job_dir / NODES_DIR / node


def write_status(job_dir: Path, status: NodeStatus) -> Path:
    target = node_dir(job_dir, status.node) / STATUS_FILENAME
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}")
    tmp.write_text(json.dumps(status.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
    tmp.replace(target)
    return target


_MAX_STATUS_BYTES = 16 << 20


def read_statuses(job_dir: Path) -> dict[str, NodeStatus]:
    """Every status.json under the job folder, by node; a corrupt one is bad input."""
    found: dict[str, NodeStatus] = {}
    for path in sorted((job_dir / NODES_DIR).glob(f"*/{STATUS_FILENAME}")):
        try:
            status = NodeStatus.model_validate(read_json_file(path, _MAX_STATUS_BYTES))
        except ValidationError as exc:
            raise BadInput(f"{path}: not a node status: {exc}") from None
        found[status.node] = status
    return found
