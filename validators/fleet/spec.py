"""What a fleet run is: the stack, where its wheels are, which nodes, how often, where to write.

`fleet submit` writes the spec as `<job-dir>/fleet.json` before anything is submitted; every
node step and the collector read that file, so the nodes run exactly what was submitted and
the verdict knows which nodes were expected (a node that never wrote its status is MISSING).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator

from stackgate.errors import BadInput
from stackgate.files import read_json_file
from stackgate.model import StrictModel, validation_problems
from validators.fleet.slurm.options import SlurmOptions

FLEET_SCHEMA_VERSION: Literal[1] = 1
SPEC_FILENAME = "fleet.json"
NODE_PLACEHOLDER = "{node}"

_NODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,252}\Z")
# Like a stack name (upper case allowed: the default id carries a UTC stamp); it names the job
# folder, the scheduler jobs and Kubernetes objects, and appears on script lines.
_FLEET_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z")
# Paths go into scripts shell-quoted, but a control character (a newline above all) has no
# business in a path that a batch script, a log line and a Kubernetes field all carry.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


# The schedulers a fleet run can go through (validators.fleet.schedulers: one class each).
SchedulerName = Literal["slurm", "kubernetes"]


# The user the pods run as (the image's USER too: fleet/kubernetes/Containerfile).
NON_ROOT_UID = 65532


class KubeOptions(StrictModel):
    image: str = Field(description="the stackgate image (checkout + uv), pinned by digest")
    namespace: str = "default"
    gpus: int = Field(default=8, ge=0, description="nvidia.com/gpu per pod")
    claim: str = Field(
        default="stackgate-fleet",
        description="ReadWriteMany PersistentVolumeClaim holding wheelhouse and job folders",
    )
    claim_mount: str = "/fleet"
    host_path: str = Field(
        default="/var/lib/stackgate",
        description="node-local folder (hostPath) the env is built in and reused from; "
        "empty: an emptyDir (Pod Security baseline refuses hostPath)",
    )
    kubectl_image: str = Field(
        default="registry.k8s.io/kubectl:v1.31.0",
        description="image of the collector's wait step (needs `kubectl`)",
    )
    parallelism: int | None = Field(default=None, ge=1, description="pods at once")
    node_deadline_s: int = Field(
        default=6 * 3600, ge=60, description="activeDeadlineSeconds of one validation pod"
    )
    cpu: str = Field(default="8", description="CPU request of a validation pod")
    memory: str = Field(default="64Gi", description="memory request of a validation pod")
    priority_class: str | None = Field(default=None, description="priorityClassName")
    run_as_user: int = Field(
        default=NON_ROOT_UID,
        ge=1,
        le=2**31 - 1,
        description="uid, gid and fsGroup of every container (runAsNonRoot: never root)",
    )


class FleetSpec(StrictModel):
    schema_version: Literal[1] = FLEET_SCHEMA_VERSION
    fleet_id: str = Field(description="names the job folder and the scheduler jobs")
    stack: str = Field(description="stack name in the checkout's stacks/, or a manifest path")
    stack_name: str
    wheelhouse: str = Field(description="folder from `builder wheelhouse`, visible on nodes")
    nodes: list[str] = Field(min_length=1, description="the node set: every one gets a verdict")
    skipped: dict[str, str] = Field(
        default_factory=dict,
        description="nodes not submitted, and why (Slurm said drained/down at submit time)",
    )
    job_dir: str = Field(description="the per-job folder every node writes into (shared)")
    checkout: str = Field(description="the stackgate checkout on the nodes")
    python: str = Field(description="interpreter that runs stackgate on the nodes")
    build_python: str | None = Field(default=None, description="`builder build --python`")
    local_root: str = Field(
        description="node-local folder for envs and the node's own store; "
        "'{node}' in it is replaced by the node's name"
    )
    runs: int = Field(default=8, ge=1, description="validation runs per node")
    only: list[str] = Field(default_factory=list, description="`validators run --only`")
    options: list[str] = Field(default_factory=list, description="`validators run --option`")
    allow_host_mismatch: bool = Field(
        default=False, description="test stands only: record nodes that miss the targets"
    )
    store: str | None = Field(default=None, description="the team's store the collector fills")
    scheduler: SchedulerName = "slurm"
    slurm: SlurmOptions = Field(default_factory=SlurmOptions)
    kubernetes: KubeOptions | None = None

    @field_validator("fleet_id")
    @classmethod
    def _fleet_id(cls, value: str) -> str:
        if not _FLEET_ID.match(value):
            raise ValueError(
                f"{value!r} is not a fleet id (letters, digits, '.', '_', '-'; starts with a "
                "letter or digit; at most 100)"
            )
        return value

    @field_validator(
        "stack", "wheelhouse", "job_dir", "checkout", "python", "build_python", "local_root",
        "store",
    )  # fmt: skip
    @classmethod
    def _no_control(cls, value: str | None) -> str | None:
        if value is not None and (_CONTROL.search(value) or not value):
            raise ValueError(f"{value!r}: empty, or a control character (newline, tab...)")
        return value

    @field_validator("nodes")
    @classmethod
    def _nodes(cls, value: list[str]) -> list[str]:
        bad = [n for n in value if not _NODE.match(n)]
        if bad:
            raise ValueError(f"not node names: {', '.join(map(repr, bad[:5]))}")
        counts = Counter(value)  # one pass: a pairwise count is quadratic
        dupes = sorted(n for n, k in counts.items() if k > 1)
        if dupes:
            raise ValueError(f"listed twice: {', '.join(dupes[:5])}")
        return value

    @cached_property
    def targets(self) -> list[str]:
        """The nodes that get a job, in element/index order (computed once per spec)."""
        return [n for n in self.nodes if n not in self.skipped]

    def index_of(self) -> dict[str, int]:
        """{node: its element/completion index} (one pass; callers keep it, not recompute)."""
        return {node: i for i, node in enumerate(self.targets)}

    def local_dir(self, node: str) -> Path:
        return Path(self.local_root.replace(NODE_PLACEHOLDER, node))

    @property
    def folder(self) -> Path:
        return Path(self.job_dir)

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"


def read_spec(path: Path) -> FleetSpec:
    if not path.is_file():
        raise BadInput(f"{path}: cannot read the fleet spec: no such file")
    data = read_json_file(path, 16 << 20)  # regular file, bounded, no duplicate keys
    try:
        return FleetSpec.model_validate(data)
    except ValidationError as exc:
        raise BadInput(f"{path}: invalid fleet spec", details=validation_problems(exc)) from None
