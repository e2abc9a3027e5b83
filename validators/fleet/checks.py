"""One node's files against what this fleet run expects of them.

Anyone with write access to the shared job folder can write any file in it, so a node's status
and record count only when bound to the node and the run:
- the status sits in the node's folder and names the node, this fleet id, the element index and,
  on Slurm, the element (`<array>_<task>`) pinned to the node;
- its attempt claimed its number in the node's folder, and only one attempt started in this run
  (a scheduler requeue is a second: FAIL, saying so);
- the scheduler agrees: the element ran on this node, and a PASS comes from an element that
  exited 0 (the node step exits 1 on FAIL);
- the record file lies under `records/`, hashes to its id, is the id the status names, and names
  this node as host and this run in its note.
Anything else is the node's FAIL, naming the file and what did not match.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from stackgate.errors import BadInput
from validators.fleet.elements import Element, Submission
from validators.fleet.node import record_note
from validators.fleet.schedulers import scheduler_of
from validators.fleet.spec import FleetSpec
from validators.fleet.status import (
    RECORDS_DIR,
    STATUS_FILENAME,
    FailedCheck,
    NodeFiles,
    NodeStatus,
    node_dir,
    read_node,
)
from validators.records.json_files import read_record_file_body
from validators.records.model import Record

# Slurm states of an element that has ended; only COMPLETED (exit 0) goes with a PASS.
_ENDED = (
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
    "BOOT_FAIL", "DEADLINE",
)  # fmt: skip


@dataclass(frozen=True)
class Expected:
    spec: FleetSpec
    submission: Submission | None
    elements: Mapping[str, Element]
    index: dict[str, int]

    @classmethod
    def of(
        cls, spec: FleetSpec, submission: Submission | None, elements: Mapping[str, Element]
    ) -> Expected:
        return cls(spec, submission, elements, spec.index_of())


@dataclass
class NodeJudgement:
    verdict: Literal["PASS", "FAIL", "MISSING"]
    phase: str | None = None
    reasons: list[str] = field(default_factory=list)
    failed_checks: list[FailedCheck] = field(default_factory=list)
    record: Record | None = None
    record_file: str | None = None
    scheduler: str | None = None
    body: str | None = None  # the record as the store keeps it (PASS)


def _fail(reasons: list[str], phase: str = "collect", **kw: object) -> NodeJudgement:
    return NodeJudgement("FAIL", phase, reasons, **kw)  # type: ignore[arg-type]


def judge_node(expected: Expected, node: str) -> NodeJudgement:
    spec = expected.spec
    files = read_node(spec.folder, node)
    element = expected.elements.get(node)
    note = element.note() if element else None
    where = node_dir(spec.folder, node) / STATUS_FILENAME
    if node in spec.skipped:
        if files.status is not None or files.attempts or files.problem:
            why = f"{where}: a status for a node that was not submitted ({spec.skipped[node]})"
            return _fail([why])
        return NodeJudgement("MISSING", None, _never_reported(spec.skipped[node]))
    if files.problem:
        return _fail([files.problem], scheduler=note)
    if len(files.attempts) > 1:
        return _fail([_attempts(files, where.parent)], scheduler=note)
    status = files.status
    if status is None:
        return NodeJudgement("MISSING", None, _never_reported(note), scheduler=note)
    mismatch = _binding(expected, node, files, status, element)
    if mismatch:
        return _fail([f"{where}: {m}" for m in mismatch], scheduler=note)
    if status.outcome != "PASS":
        return NodeJudgement(
            "FAIL", status.phase, status.reasons, status.failed_checks, scheduler=note
        )
    read, problem = _record(spec, node, status)
    if read is None:
        return _fail([problem or "no record"], scheduler=note)
    return NodeJudgement(
        "PASS",
        status.phase,
        failed_checks=status.failed_checks,
        record=read[0],
        record_file=status.record_file,
        scheduler=note,
        body=read[1],
    )


def _never_reported(note: str | None) -> list[str]:
    return ["never reported (no nodes/<node>/status.json)"] + ([note] if note else [])


def _attempts(files: NodeFiles, folder: Path) -> str:
    numbers = ", ".join(map(str, files.attempts))
    return (
        f"{folder}: {len(files.attempts)} attempts in one fleet run (attempt files {numbers}): "
        "the scheduler started this node's step again (a requeue); a node is validated once "
        "per fleet run, so neither result counts: submit again for this node"
    )


def _binding(
    expected: Expected, node: str, files: NodeFiles, status: NodeStatus, element: Element | None
) -> list[str]:
    spec = expected.spec
    out: list[str] = []
    if status.node != node:
        out.append(f"names node {status.node!r}, but lies in {node!r}'s folder")
    if status.fleet_id != spec.fleet_id:
        out.append(f"names fleet run {status.fleet_id!r}, not {spec.fleet_id!r}")
    if status.attempt not in files.attempts:
        out.append(f"written by attempt {status.attempt}, which never claimed its number")
    index = expected.index.get(node)
    scheduler = scheduler_of(spec)
    if scheduler.pins(spec) and index is not None and status.index != index:
        out.append(f"names element index {status.index}, the node's is {index}")
    if expected.submission is not None and status.index is not None:
        want = scheduler.element_job(expected.submission, status.index)
        if want is not None and status.scheduler_job != want:
            out.append(
                f"written by {scheduler.name} job {status.scheduler_job}, the node's element is {want}"
            )
    if element is not None:
        out += _scheduler_disagrees(node, status, element)
    return out


def _scheduler_disagrees(node: str, status: NodeStatus, element: Element) -> list[str]:
    out: list[str] = []
    if element.node is not None and element.node != node:
        out.append(f"Slurm ran element {element.job} on {element.node}, not on {node}")
    if element.state in ("PENDING",) or (element.state in _ENDED and element.node is None):
        out.append(f"Slurm never ran element {element.job} ({element.state})")
    elif (
        status.outcome == "PASS"
        and element.state in _ENDED
        and (element.state != "COMPLETED" or element.exit_code not in (None, "0:0"))
    ):
        out.append(
            f"says PASS, but Slurm recorded element {element.job} as {element.state}, "
            f"exit {element.exit_code}"
        )
    return out


def _record(
    spec: FleetSpec, node: str, status: NodeStatus
) -> tuple[tuple[Record, str] | None, str | None]:
    """The node's record and its body (the store's form), or None and what is wrong."""
    if status.record_file is None:
        return None, "the node says PASS but names no record file"
    rel = Path(status.record_file)
    if rel.is_absolute() or ".." in rel.parts or rel.parts[:1] != (RECORDS_DIR,):
        return None, f"record_file {status.record_file!r}: not a file under {RECORDS_DIR}/"
    path = spec.folder / rel
    try:
        record, body = read_record_file_body(path, under=spec.folder)
    except BadInput as exc:
        return None, "; ".join(exc.lines())
    wrong: list[str] = []
    if record.record_id != status.record_id:
        wrong.append(f"is record {record.short_id}, the status names {str(status.record_id)[:12]}")
    if record.host.hostname != node:
        wrong.append(f"was made on host {record.host.hostname!r}, not on {node!r}")
    if record.stack != spec.stack_name:
        wrong.append(f"is a record of stack {record.stack!r}, not {spec.stack_name!r}")
    if record.note != record_note(spec, node):
        wrong.append(f"says {record.note!r}, not {record_note(spec, node)!r}")
    if record.kind != "known-good":
        wrong.append(f"is a {record.kind} record")
    if wrong:
        return None, f"{path}: " + "; ".join(wrong)
    return (record, body), None
