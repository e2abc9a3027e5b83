"""What the scheduler said about each node's element, kept in the job folder.

Slurm forgets a finished job `MinJobAge` seconds after it ended (300 by default) and `sacct`
needs accounting (slurmdbd), which many clusters lack. So whatever status, collect or verdict
learn from `scontrol show job` / `sacct` is merged into `<job-dir>/scheduler.json`: a newer
answer replaces an older one for the same element, and no answer never erases one. The
verdict reads the merged view: the reason a MISSING node never reported, and the exit code
and node Slurm recorded for an element, to check the node's own status against.
"""

from __future__ import annotations

import bisect
import functools
import json
import logging
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, model_validator

from stackgate.errors import BadInput, StackgateError
from stackgate.files import atomic_write_text, read_json_file
from stackgate.model import StrictModel
from validators.fleet.slurm.states import element_states
from validators.fleet.spec import FleetSpec, SchedulerName

log = logging.getLogger("stackgate.fleet")

SUBMISSION_FILENAME = "submission.json"
ELEMENTS_FILENAME = "scheduler.json"
_MAX_BYTES = 64 << 20


class Submission(StrictModel):
    """`submission.json`: the scheduler's ids for this fleet run, written before release."""

    scheduler: SchedulerName
    arrays: list[str] = Field(default_factory=list, description="Slurm array job ids")
    offsets: list[int] = Field(default_factory=list, description="first node index per array")
    max_array_size: int | None = None
    pinned_with: Literal["libslurm", "scontrol", "none"] | None = Field(
        default=None,
        description="how the pins reached Slurm: the `scontrol update` commands listed, or the "
        "same update RPCs through libslurm (validators/fleet/slurm/pin.py); none: not pinned",
    )
    collector_job: str | None = None
    commands: list[list[str]] = Field(default_factory=list)

    def to_json(self) -> str:
        """The file's text: the fields the scheduler set, in the model's order."""
        return json.dumps(self.model_dump(mode="json", exclude_unset=True), indent=2) + "\n"

    @model_validator(mode="after")
    def _one_offset_per_array_ascending(self) -> Submission:
        if len(self.offsets) != len(self.arrays):
            raise ValueError(f"{len(self.arrays)} arrays but {len(self.offsets)} offsets")
        if any(b <= a for a, b in zip(self.offsets, self.offsets[1:], strict=False)):
            raise ValueError("offsets must ascend (one first node index per array)")
        return self

    def element_of(self, index: int) -> str | None:
        """Slurm's `<array>_<task>` that was to run node index `index` (a binary search:
        a fleet is up to MaxArraySize/100-element arrays, offsets ascending)."""
        starts = self._starts
        at = bisect.bisect_right(starts, index) - 1
        if at < 0:
            return None
        return f"{self.arrays[at]}_{index - starts[at]}"

    def index_of(self, array: str, task: int) -> int | None:
        offset = self._offset_by_array.get(array)
        return None if offset is None else offset + task

    @functools.cached_property
    def _starts(self) -> list[int]:
        return self.offsets[: len(self.arrays)]

    @functools.cached_property
    def _offset_by_array(self) -> dict[str, int]:
        return dict(zip(self.arrays, self.offsets, strict=False))


def read_submission(job_dir: Path) -> Submission | None:
    path = job_dir / SUBMISSION_FILENAME
    if not path.exists():
        return None
    try:
        return Submission.model_validate(read_json_file(path, _MAX_BYTES))
    except (BadInput, ValidationError) as exc:
        log.warning("%s: unreadable, the scheduler's ids are not used: %s", path, exc)
        return None


class Element(StrictModel):
    job: str = Field(description="<array>_<task>")
    state: str
    exit_code: str | None = None
    node: str | None = Field(default=None, description="where Slurm ran it")
    reason: str | None = None
    source: str = "scontrol"

    def note(self) -> str:
        text = f"slurm {self.job}: {self.state}, exit {self.exit_code}"
        return text + (f", {self.reason}" if self.reason else "")


class ElementsFile(StrictModel):
    schema_version: Literal[1] = 1
    elements: dict[str, Element] = Field(default_factory=dict, description="by node")


def read_elements(job_dir: Path) -> dict[str, Element]:
    path = job_dir / ELEMENTS_FILENAME
    if not path.exists():
        return {}
    try:
        return ElementsFile.model_validate(read_json_file(path, _MAX_BYTES)).elements
    except (BadInput, ValidationError) as exc:
        log.warning("%s: unreadable, learned again from the scheduler: %s", path, exc)
        return {}


def learn(spec: FleetSpec, submission: Submission | None) -> dict[str, Element]:
    """Ask Slurm (scontrol, then sacct), merge into scheduler.json, return the merged view."""
    known = read_elements(spec.folder)
    if spec.scheduler != "slurm" or submission is None or not submission.arrays:
        return known
    try:
        states = element_states(submission.arrays)
    except StackgateError:  # no scontrol here (collecting on another machine)
        return known
    targets = spec.targets
    merged = dict(known)
    for e in states:
        index = submission.index_of(e.array, e.task)
        if index is None or not 0 <= index < len(targets):
            continue
        merged[targets[index]] = Element(
            job=e.job,
            state=e.state,
            exit_code=e.exit_code,
            node=e.node,
            reason=e.reason,
            source=e.source,
        )
    if merged != known:
        text = json.dumps(ElementsFile(elements=merged).model_dump(mode="json"), indent=1)
        try:
            atomic_write_text(spec.folder / ELEMENTS_FILENAME, text + "\n", durable=False)
        except OSError as exc:  # a read-only view of the job folder: still a verdict
            log.warning("cannot keep the scheduler's word in %s: %s", spec.folder, exc)
    return merged
