"""One verdict per node of the fleet run, read only from the job folder.

- PASS: mark-good accepted the node, its record reads back intact, both are bound to this node
  and run (checks.py), and its env is the one its peers built;
- FAIL: the node says which step stopped it and why; or its files cannot be trusted (unreadable,
  another node's or run's, contradicted by the scheduler, two attempts), naming the file; or its
  env's tree hash differs from the majority of nodes that built the same lock;
- MISSING: an expected node that never wrote a status, with the scheduler's view when there is one.

PASS nodes are grouped into host classes by their record's fingerprint (GPU model, count, compute
capability, interconnect, driver major) and each class is searched for lemons (outliers.py). A
lemon stays PASS and carries the metrics that set it apart.
"""

from __future__ import annotations

import json
import os
import zlib
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path
from typing import Literal

from pydantic import Field

from stackgate.envtree import read_listing_file
from stackgate.files import atomic_write_text
from stackgate.model import StrictModel
from validators.fleet.checks import Expected, NodeJudgement, judge_node
from validators.fleet.elements import Element, Submission
from validators.fleet.outliers import LEMON_METRICS, MIN_PEERS, find_lemons, lemon_metric
from validators.fleet.spec import FleetSpec
from validators.fleet.status import TREE_LISTING, FailedCheck, node_dir, reported_nodes
from validators.records.model import HostFingerprint, Record, StoredBody, stored_body

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
    env_tree: str | None = Field(default=None, description="the env's tree sha256 (PASS)")
    scheduler: str | None = Field(default=None, description="the scheduler's word on it")


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


class EnvGroup(StrictModel):
    """The nodes that built one lock (same Python, topology): they must hold one tree."""

    lock_sha256: str | None
    majority_tree: str | None
    trees: dict[str, int] = Field(description="tree sha256 -> nodes")
    differing: list[str] = Field(default_factory=list, description="nodes FAILed for it")


class FleetVerdict(StrictModel):
    schema_version: Literal[1] = 1
    fleet_id: str
    stack: str
    expected_nodes: int
    counts: dict[str, int]
    nodes: list[NodeVerdict]
    classes: list[HostClass]
    envs: list[EnvGroup] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(n.verdict == "PASS" and not n.lemon for n in self.nodes)


def host_class(host: HostFingerprint) -> str:
    """Nodes whose numbers are comparable: same GPUs, count, CC, interconnect, driver major."""
    driver = host.driver.split(".")[0] if host.driver else "?"
    ccs = "+".join(host.gpu.compute_capabilities) or "?"
    model = host.gpu.model or "no GPU"
    return f"{host.gpu.count}x {model} (CC {ccs}, {host.interconnect}, driver {driver})"


@dataclass(frozen=True)
class Judged:
    """The verdict, and for its PASS nodes a slim copy of each record (build, host, lemon
    metrics: what judging needs; ~70 KB less per node than the whole record), its file, and
    the whole record as judged: its canonical JSON, zlib-compressed (what collect imports)."""

    verdict: FleetVerdict
    records: dict[str, Record]
    files: dict[str, Path]
    bodies: dict[str, bytes]

    def _split(self, lemon: bool) -> dict[str, Path]:
        by_node = {n.node: n for n in self.verdict.nodes}
        return {n: self.files[n] for n in self.records if bool(by_node[n].lemon) == lemon}

    def known_good(self) -> dict[str, Path]:
        """Record files fit to be a baseline: PASS and not a lemon, by node."""
        return self._split(False)

    def lemons(self) -> dict[str, Path]:
        return self._split(True)

    def read(self, node: str) -> Record | None:
        """The node's whole record as it was judged (its file is not read again: what is
        imported is what was judged, whatever the file holds by now). None if the kept copy
        does not read back as the judged record, its content hashing to the judged id (a
        lemon's is sealed again under a new id as a candidate: checked here, before)."""
        try:
            record = Record.model_validate(json.loads(zlib.decompress(self.bodies[node])))
        except (KeyError, ValueError, zlib.error):
            return None
        judged_id = self.records[node].record_id
        return record if record.record_id == judged_id == record.compute_id() else None

    def row(self, node: str) -> StoredBody | None:
        """The node's record as the store keeps it, from the body kept as it was judged (no
        parse, no dump: the store hashes the body's content against the id); None as read()."""
        try:
            body = zlib.decompress(self.bodies[node]).decode("utf-8")
        except (KeyError, UnicodeDecodeError, zlib.error):
            return None
        row = stored_body(self.records[node], body)
        return row if row.hash_matches() else None


def _body(body: str) -> bytes:
    """The record's body (its canonical JSON, made as its id was checked), compressed: ~3x
    smaller."""
    return zlib.compress(body.encode("utf-8"), 1)


def _slim(record: Record, keep: dict[str, bool], patterns: Sequence[str]) -> Record:
    for key in record.metrics:
        if key not in keep:
            keep[key] = lemon_metric(key, patterns)
    metrics = {k: v for k, v in record.metrics.items() if keep[k]}
    return record.model_construct(
        **{
            **dict(record),
            "checks": [],
            "distributions": {},
            "golden_outputs": {},
            "manifest": {},
            "metrics": metrics,
        }
    )


def judge(
    spec: FleetSpec,
    *,
    elements: Mapping[str, Element] | None = None,
    submission: Submission | None = None,
    patterns: Sequence[str] = LEMON_METRICS,
    min_peers: int = MIN_PEERS,
) -> Judged:
    expected = Expected.of(spec, submission, elements or {})
    verdicts: dict[str, NodeVerdict] = {}
    records: dict[str, Record] = {}
    files: dict[str, Path] = {}
    bodies: dict[str, bytes] = {}
    listed = set(spec.nodes)
    strangers = [n for n in reported_nodes(spec.folder) if n not in listed]
    for node, judged, body in _judge_nodes(expected, [*spec.nodes, *strangers], patterns):
        verdict = NodeVerdict(
            node=node,
            verdict=judged.verdict,
            phase=judged.phase,
            reasons=judged.reasons,
            failed_checks=judged.failed_checks,
            expected=node in listed,
            scheduler=judged.scheduler,
        )
        if judged.record is not None:
            record = judged.record
            verdict = verdict.model_copy(
                update={
                    "record_id": record.record_id,
                    "host_class": host_class(record.host),
                    "env_tree": record.build.env_tree_sha256,
                }
            )
            records[node] = record  # slimmed by _judge_chunk
            files[node] = spec.folder / str(judged.record_file)
            if body is not None:
                bodies[node] = body
        verdicts[node] = verdict
    envs = _env_groups(spec.folder, verdicts, records)
    for node in {n for g in envs for n in g.differing}:
        records.pop(node, None)
        bodies.pop(node, None)
    classes = _classes(verdicts, records, patterns, min_peers)
    for _cls, lemons in classes:
        for node, found in lemons.items():
            verdicts[node] = verdicts[node].model_copy(update={"lemon": found})
    counts = {"PASS": 0, "FAIL": 0, "MISSING": 0, "LEMON": 0}
    for v in verdicts.values():
        counts[v.verdict] += 1
        counts["LEMON"] += bool(v.lemon)
    fleet = FleetVerdict(
        fleet_id=spec.fleet_id,
        stack=spec.stack_name,
        expected_nodes=len(spec.nodes),
        counts=counts,
        nodes=list(verdicts.values()),
        classes=[cls for cls, _ in classes],
        envs=envs,
    )
    return Judged(fleet, records, files, bodies)


# Below this many nodes one process judges them all (a pool's start costs more than it saves).
PARALLEL_FROM = 2000
_CHUNK = 500


def _judge_chunk(
    expected: Expected, nodes: list[str], patterns: Sequence[str]
) -> list[tuple[str, NodeJudgement, bytes | None]]:
    """Judge some nodes; their records slimmed here, and the whole record compressed, so
    little crosses back to the parent."""
    keep: dict[str, bool] = {}
    out: list[tuple[str, NodeJudgement, bytes | None]] = []
    for node in nodes:
        judged = judge_node(expected, node)
        body = None
        if judged.record is not None and judged.body is not None:
            body = _body(judged.body)
            judged.record = _slim(judged.record, keep, patterns)
        judged.body = None  # what crosses back to the parent is the compressed copy
        out.append((node, judged, body))
    return out


def _judge_nodes(
    expected: Expected, nodes: list[str], patterns: Sequence[str]
) -> Iterator[tuple[str, NodeJudgement, bytes | None]]:
    """Each node's files are read and checked on their own (O(1) in the fleet size); a large
    fleet is judged in chunks by a process per CPU (at most 8)."""
    workers = min(os.cpu_count() or 1, 8)
    if len(nodes) < PARALLEL_FROM or workers < 2:
        yield from _judge_chunk(expected, nodes, patterns)
        return
    chunks = [nodes[i : i + _CHUNK] for i in range(0, len(nodes), _CHUNK)]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for done in pool.map(_judge_chunk, repeat(expected), chunks, repeat(patterns)):
            yield from done


def _env_key(record: Record) -> tuple[str | None, str | None, str | None]:
    return (record.build.lock_sha256, record.build.python, record.build.topology)


def _env_groups(
    job_dir: Path, verdicts: dict[str, NodeVerdict], records: Mapping[str, Record]
) -> list[EnvGroup]:
    """Nodes that built one lock must hold one env: a node whose tree hash differs from the
    majority's is FAIL (in place: `verdicts` is updated), naming the files that differ. With
    no majority (a tie) every node of the group that differs from another is FAIL."""
    groups: dict[tuple[str | None, str | None, str | None], list[str]] = {}
    for node, record in records.items():
        if record.build.env_tree_sha256:
            groups.setdefault(_env_key(record), []).append(node)
    out: list[EnvGroup] = []
    for key, nodes in sorted(groups.items(), key=lambda kv: str(kv[0])):
        trees = Counter(str(records[n].build.env_tree_sha256) for n in nodes)
        [(top, count)] = trees.most_common(1)
        majority = top if count * 2 > len(nodes) else None
        differing = sorted(
            n for n in nodes if len(trees) > 1 and records[n].build.env_tree_sha256 != majority
        )
        peer = next((n for n in nodes if records[n].build.env_tree_sha256 == majority), None)
        for node in differing:
            verdicts[node] = _tree_fail(
                job_dir, verdicts[node], records[node], peer, majority, len(nodes)
            )
        out.append(
            EnvGroup(
                lock_sha256=key[0], majority_tree=majority, trees=dict(trees), differing=differing
            )
        )
    return out


def _tree_fail(
    job_dir: Path,
    verdict: NodeVerdict,
    record: Record,
    peer: str | None,
    majority: str | None,
    nodes: int,
) -> NodeVerdict:
    mine = str(record.build.env_tree_sha256)
    if majority is None:
        why = f"env tree {mine[:16]}: the {nodes} nodes that built this lock disagree, no majority"
    else:
        why = (
            f"env tree {mine[:16]} differs from its peers' {majority[:16]} (the majority of "
            f"{nodes} nodes that built lock {str(record.build.lock_sha256)[:12]})"
        )
    reasons = [why, *_differing_files(job_dir, verdict.node, peer)]
    return verdict.model_copy(
        update={"verdict": "FAIL", "phase": "collect", "reasons": reasons, "host_class": None}
    )


def _differing_files(job_dir: Path, node: str, peer: str | None, limit: int = 10) -> list[str]:
    if peer is None:
        return []
    mine = read_listing_file(node_dir(job_dir, node) / TREE_LISTING, under=job_dir)
    theirs = read_listing_file(node_dir(job_dir, peer) / TREE_LISTING, under=job_dir)
    if mine is None or theirs is None:
        return [f"(no file listing to compare: nodes/{node}/{TREE_LISTING} or nodes/{peer}/)"]
    out: list[str] = []
    for rel in sorted(set(mine) | set(theirs)):
        if mine.get(rel) == theirs.get(rel):
            continue
        what = (
            "only here" if rel not in theirs else "missing here" if rel not in mine else "differs"
        )
        out.append(f"{what} (vs {peer}): {rel}")
        if len(out) >= limit:
            break
    return out


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
