"""One verdict per node of the fleet run, read only from the job folder.

- PASS: the node's status says mark-good accepted it and its record reads back intact;
- FAIL: the node says which step stopped it and why (the failed checks of its runs, or the
  build's or mark-good's own words);
- MISSING: an expected node that never wrote a status (never ran, killed, lost its disk);
  the scheduler's view of it is attached when there is one.

PASS nodes are grouped into host classes by their record's fingerprint (GPU model, count,
compute capability, interconnect, driver major) and each class is searched for lemons
(validators/fleet/outliers.py). A lemon stays PASS (every check passed) and carries the
metrics that set it apart.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field

from stackgate.errors import BadInput
from stackgate.files import atomic_write_text
from stackgate.model import StrictModel
from validators.fleet.outliers import LEMON_METRICS, MIN_PEERS, find_lemons
from validators.fleet.spec import FleetSpec
from validators.fleet.status import FailedCheck, NodeStatus, read_statuses
from validators.records.json_files import read_record_file
from validators.records.model import HostFingerprint, Record

VERDICT_FILENAME = "verdict.json"


class LemonMetric(StrictModel):
    metric: str
    value: float
    class_median: float
    worse_by_pct: float
    threshold_pct: float


class NodeVerdict(StrictModel):
    node: str
    verdict: Literal["PASS", "FAIL", "MISSING"]
    phase: str | None = None
    reasons: list[str] = Field(default_factory=list)
    failed_checks: list[FailedCheck] = Field(default_factory=list)
    record_id: str | None = None
    host_class: str | None = None
    lemon: list[LemonMetric] = Field(default_factory=list)
    expected: bool = Field(default=True, description="False: reported but not in the node set")


class ClassNoise(StrictModel):
    metric: str
    nodes: int
    median: float
    spread_pct: float
    within_pct: float
    threshold_pct: float


class HostClass(StrictModel):
    name: str
    nodes: list[str]
    noise: list[ClassNoise] = Field(default_factory=list)
    note: str | None = None


class FleetVerdict(StrictModel):
    schema_version: Literal[1] = 1
    fleet_id: str
    stack: str
    expected_nodes: int
    counts: dict[str, int]
    nodes: list[NodeVerdict]
    classes: list[HostClass]

    @property
    def ok(self) -> bool:
        return all(n.verdict == "PASS" and not n.lemon for n in self.nodes)


def host_class(host: HostFingerprint) -> str:
    """Nodes whose numbers are comparable: same GPUs, count, CC, interconnect, driver major."""
    driver = host.driver.split(".")[0] if host.driver else "?"
    ccs = "+".join(host.gpu.compute_capabilities) or "?"
    model = host.gpu.model or "no GPU"
    return f"{host.gpu.count}x {model} (CC {ccs}, {host.interconnect}, driver {driver})"


def _pass_or_fail(status: NodeStatus, job_dir: Path) -> tuple[NodeVerdict, Record | None]:
    if status.outcome != "PASS":
        return (
            NodeVerdict(
                node=status.node,
                verdict="FAIL",
                phase=status.phase,
                reasons=status.reasons,
                failed_checks=status.failed_checks,
            ),
            None,
        )
    if status.record_file is None:
        reasons = ["the node says PASS but names no record file"]
        return NodeVerdict(node=status.node, verdict="FAIL", phase="collect", reasons=reasons), None
    try:
        record = read_record_file(job_dir / status.record_file)
    except BadInput as exc:
        return (
            NodeVerdict(node=status.node, verdict="FAIL", phase="collect", reasons=exc.lines()),
            None,
        )
    verdict = NodeVerdict(
        node=status.node,
        verdict="PASS",
        phase=status.phase,
        record_id=record.record_id,
        host_class=host_class(record.host),
        failed_checks=status.failed_checks,
    )
    return verdict, record


def compute_verdict(
    spec: FleetSpec,
    *,
    scheduler_notes: Mapping[str, str] | None = None,
    patterns: Sequence[str] = LEMON_METRICS,
    min_peers: int = MIN_PEERS,
) -> FleetVerdict:
    job_dir = spec.folder
    statuses = read_statuses(job_dir)
    verdicts: dict[str, NodeVerdict] = {}
    records: dict[str, Record] = {}
    for node in [*spec.nodes, *sorted(set(statuses) - set(spec.nodes))]:
        status = statuses.get(node)
        if status is None:
            note = spec.skipped.get(node) or (scheduler_notes or {}).get(node)
            reasons = ["never reported (no nodes/<node>/status.json)"] + ([note] if note else [])
            verdicts[node] = NodeVerdict(node=node, verdict="MISSING", reasons=reasons)
            continue
        verdict, record = _pass_or_fail(status, job_dir)
        if node not in spec.nodes:
            verdict = verdict.model_copy(update={"expected": False})
        verdicts[node] = verdict
        if record is not None:
            records[node] = record
    classes = _classes(verdicts, records, patterns, min_peers)
    for _cls, lemons in classes:
        for node, found in lemons.items():
            verdicts[node] = verdicts[node].model_copy(update={"lemon": found})
    counts = {"PASS": 0, "FAIL": 0, "MISSING": 0, "LEMON": 0}
    for v in verdicts.values():
        counts[v.verdict] += 1
        counts["LEMON"] += bool(v.lemon)
    return FleetVerdict(
        fleet_id=spec.fleet_id,
        stack=spec.stack_name,
        expected_nodes=len(spec.nodes),
        counts=counts,
        nodes=list(verdicts.values()),
        classes=[cls for cls, _ in classes],
    )


def _classes(
    verdicts: Mapping[str, NodeVerdict],
    records: Mapping[str, Record],
    patterns: Sequence[str],
    min_peers: int,
) -> list[tuple[HostClass, dict[str, list[LemonMetric]]]]:
    members: dict[str, list[str]] = {}
    for node, verdict in verdicts.items():
        if verdict.host_class is not None:
            members.setdefault(verdict.host_class, []).append(node)
    out: list[tuple[HostClass, dict[str, list[LemonMetric]]]] = []
    for name, nodes in sorted(members.items()):
        metrics = {n: records[n].metrics for n in nodes}
        noise, outliers = find_lemons(metrics, patterns=patterns, min_peers=min_peers)
        lemons: dict[str, list[LemonMetric]] = {}
        for o in outliers:
            lemons.setdefault(o.node, []).append(
                LemonMetric(
                    metric=o.metric,
                    value=round(o.value, 4),
                    class_median=round(o.centre, 4),
                    worse_by_pct=round(100 * o.worse_by, 2),
                    threshold_pct=round(100 * o.threshold, 2),
                )
            )
        note = None
        if len(nodes) < min_peers:
            note = f"{len(nodes)} node(s): lemons need >= {min_peers} peers in a class"
        elif not noise:
            note = "no lemon metrics in these records (" + ", ".join(patterns) + ")"
        cls = HostClass(
            name=name,
            nodes=sorted(nodes),
            note=note,
            noise=[
                ClassNoise(
                    metric=n.metric,
                    nodes=n.nodes,
                    median=round(n.centre, 4),
                    spread_pct=round(100 * n.spread, 3),
                    within_pct=round(100 * n.within, 3),
                    threshold_pct=round(100 * n.threshold, 2),
                )
                for n in noise
            ],
        )
        out.append((cls, lemons))
    return out


def write_verdict(job_dir: Path, verdict: FleetVerdict) -> Path:
    path = job_dir / VERDICT_FILENAME
    atomic_write_text(path, json.dumps(verdict.model_dump(mode="json"), indent=2) + "\n")
    return path
