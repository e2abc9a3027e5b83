"""The fleet verdict from a job folder (real records, real status files), the lemon rule, and
the node list parser."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stackgate.errors import BadInput
from validators.core.results import Report, Result
from validators.fleet.elements import Element
from validators.fleet.outliers import find_lemons, lemon_metric
from validators.fleet.spec import FleetSpec
from validators.fleet.status import FailedCheck, NodeStatus, claim_attempt, write_status
from validators.fleet.verdict import host_class, judge
from validators.records.extract import run_metrics
from validators.records.model import BuildFacts, GpuInfo, HostFingerprint, Record, canonical_json
from validators.records.store import RecordStore

ROOT = Path(__file__).resolve().parents[2]
DECODE = "serve-bench.single_stream/single_stream_decode_tok_s"
NCCL = "runtime.nccl_latency/allreduce_1tok_p50_us"
THROUGHPUT = "serve-bench.sweep/output_throughput@c16"


def _runs(rng: random.Random, mean: float, cv: float, n: int = 8) -> list[float]:
    return [mean * (1 + rng.gauss(0, cv)) for _ in range(n)]


def _fleet(
    rng: random.Random, nodes: int, slow: dict[int, float]
) -> dict[str, dict[str, list[float]]]:
    """Per node: decode tok/s (0.74% run noise), NCCL latency (3.2%), throughput (3.5%)."""
    out = {}
    for i in range(nodes):
        factor = slow.get(i, 1.0)
        out[f"gpu{i:02d}"] = {
            DECODE: _runs(rng, 60.0 * factor, 0.0074),
            NCCL: _runs(rng, 68.0 / factor, 0.032),
            THROUGHPUT: _runs(rng, 2500.0 * factor, 0.035),
        }
    return out


def test_a_node_6_percent_slower_is_named_with_its_metrics() -> None:
    fleet = _fleet(random.Random(7), 24, {5: 0.94})
    noise, lemons = find_lemons(fleet)
    assert {o.node for o in lemons} == {"gpu05"}
    flagged = {o.metric for o in lemons}
    assert DECODE in flagged  # 0.74% noise: 6% is far outside
    assert all(o.worse_by > o.threshold for o in lemons)
    assert {n.metric for n in noise} == {DECODE, NCCL, THROUGHPUT}


def test_a_healthy_fleet_has_no_lemons_and_too_few_peers_judges_nothing() -> None:
    assert find_lemons(_fleet(random.Random(11), 40, {}))[1] == []
    tiny = _fleet(random.Random(3), 4, {0: 0.5})
    assert find_lemons(tiny) == ([], [])  # 4 < MIN_PEERS: no distribution to stand out from


def test_only_named_metrics_with_a_direction_are_judged() -> None:
    assert lemon_metric(DECODE) and lemon_metric(NCCL) and lemon_metric(THROUGHPUT)
    assert not lemon_metric("serve-bench.sweep/p99_ttft_ms@c16")
    assert not lemon_metric("runtime.nccl_latency/total_output_tokens")


def test_nccl_latency_evidence_becomes_record_metrics() -> None:
    evidence = {
        "rows": [],
        "metrics": {"allreduce_1tok_p50_us": 68.9, "decode_step_allreduce_us": 8405.8},
    }
    report = Report(
        stack="cu130",
        started_at="2026-11-30T00:00:00Z",
        results=[
            Result(
                check="runtime.nccl_latency",
                group="runtime",
                status="PASS",
                reason="ok",
                evidence=evidence,
            )
        ],
    )
    metrics = run_metrics(report).metrics
    assert metrics[NCCL] == [68.9]
    assert lemon_metric(NCCL) and lemon_metric("runtime.nccl_latency/decode_step_allreduce_us")


H200 = HostFingerprint(
    gpu=GpuInfo(model="NVIDIA H200", count=8, compute_capabilities=["9.0"]),
    driver="580.159.04",
    interconnect="nvlink",
)
RTX = HostFingerprint(
    gpu=GpuInfo(
        model="NVIDIA RTX PRO 6000 Blackwell Server Edition", count=8, compute_capabilities=["12.0"]
    ),
    driver="580.82.07",
    interconnect="pcie",
)


def _record(
    node: str, host: HostFingerprint, metrics: dict[str, list[float]], tree: str = "a" * 64
) -> Record:
    return Record(
        stack="cu130",
        created_at="2026-11-30T22:00:00+00:00",
        stackgate_version="0.1.0",
        note=f"fleet t node {node}",
        build=BuildFacts(lock_sha256="l" * 64, env_tree_sha256=tree, python="3.12.8"),
        host=host.model_copy(update={"hostname": node}),
        runs=8,
        metrics=metrics,
    ).sealed()


def _job(tmp_path: Path) -> FleetSpec:
    """12 H200 nodes (one a lemon on NCCL), 6 RTX nodes 30% slower by nature, 1 FAIL, 1 MISSING."""
    rng = random.Random(5)
    h200 = _fleet(rng, 12, {})
    h200["gpu03"][NCCL] = _runs(rng, 68.0 * 1.25, 0.032)  # a bad link: +25% all-reduce latency
    rtx = _fleet(rng, 6, {i: 0.7 for i in range(6)})
    spec = FleetSpec(
        fleet_id="t",
        stack="cu130",
        stack_name="cu130",
        wheelhouse="/w",
        nodes=[*h200, *(f"rtx{i}" for i in range(6)), "bad1", "gone1"],
        job_dir=str(tmp_path),
        checkout=str(ROOT),
        python=sys.executable,
        local_root="/l",
    )
    for i, (node, metrics) in enumerate(
        [*h200.items(), *((f"rtx{i}", m) for i, m in enumerate(rtx.values()))]
    ):
        record = _record(node, RTX if node.startswith("rtx") else H200, metrics)
        rel = f"records/cu130/{node}-{record.short_id}.json"
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(record.to_json())
        claim_attempt(tmp_path, node, None, 0)
        write_status(
            tmp_path,
            NodeStatus(
                fleet_id="t",
                node=node,
                index=i,
                outcome="PASS",
                phase="done",
                exit_code=0,
                record_id=record.record_id,
                record_file=rel,
            ),
        )
    failed = FailedCheck(
        check="runtime.nccl_latency", status="FAIL", reason="all-reduce returned wrong sums", runs=8
    )
    claim_attempt(tmp_path, "bad1", None, 0)
    write_status(
        tmp_path,
        NodeStatus(
            fleet_id="t",
            node="bad1",
            index=18,
            outcome="FAIL",
            phase="mark-good",
            exit_code=1,
            failed_checks=[failed],
            reasons=["run 1: runtime.nccl_latency FAIL"],
        ),
    )
    (tmp_path / "fleet.json").write_text(spec.to_json())
    return spec


def test_verdict_per_node_classes_and_lemons(tmp_path: Path) -> None:
    verdict = judge(_job(tmp_path)).verdict
    by = {n.node: n for n in verdict.nodes}
    assert verdict.counts == {"PASS": 18, "FAIL": 1, "MISSING": 1, "LEMON": 1}
    assert [m.metric for m in by["gpu03"].lemon] == [NCCL]
    assert by["gpu03"].lemon[0].worse_by_pct > 15
    assert (
        by["bad1"].verdict == "FAIL" and by["bad1"].failed_checks[0].check == "runtime.nccl_latency"
    )
    assert by["gone1"].verdict == "MISSING"
    # RTX nodes are 30% slower than the H200s by nature: other class, no lemons there.
    assert {c.name for c in verdict.classes} == {host_class(H200), host_class(RTX)}
    assert not any(by[f"rtx{i}"].lemon for i in range(6))
    assert not verdict.ok


def test_a_missing_node_carries_the_schedulers_word(tmp_path: Path) -> None:
    spec = _job(tmp_path)
    elements = {"gone1": Element(job="7_19", state="TIMEOUT", exit_code="0:15", node="gone1")}
    by = {n.node: n for n in judge(spec, elements=elements).verdict.nodes}
    assert (
        by["gone1"].verdict == "MISSING"
        and by["gone1"].reasons[-1] == "slurm 7_19: TIMEOUT, exit 0:15"
    )


def test_a_record_changed_after_the_node_wrote_it_fails_that_node(tmp_path: Path) -> None:
    spec = _job(tmp_path)
    path = next((tmp_path / "records" / "cu130").glob("gpu07-*.json"))
    data = json.loads(path.read_text())
    data["metrics"][DECODE][0] *= 1.5
    path.write_text(json.dumps(data))
    by = {n.node: n for n in judge(spec).verdict.nodes}
    assert by["gpu07"].verdict == "FAIL" and "does not match its hash" in by["gpu07"].reasons[0]


def test_fleet_verdict_cli(tmp_path: Path) -> None:
    _job(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "validators", "fleet", "verdict", "--job-dir", str(tmp_path), "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False, env={"NO_COLOR": "1", "COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["counts"]["LEMON"] == 1
    assert "PASS (lemon)" in done.stderr and "allreduce_1tok_p50_us" in done.stderr


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            [
                "submit",
                "cu130",
                "--wheelhouse",
                "/nonexistent/wh",
                "--nodes",
                "a",
                "--jobs-root",
                "/tmp/j",
                "--dry-run",
            ],
            "--wheelhouse /nonexistent/wh: no such folder",
        ),
        (
            [
                "submit",
                "cu130",
                "--wheelhouse",
                ".",
                "--nodes",
                "a,b c",
                "--jobs-root",
                "/tmp/j",
                "--dry-run",
            ],
            "nodes: Value error, not node names: 'b c'",
        ),
        # Ids and paths land on script lines: a newline there would be a shell line (issue 23).
        (
            [
                "submit",
                "cu130",
                "--wheelhouse",
                ".",
                "--nodes",
                "a",
                "--jobs-root",
                "/tmp/j",
                "--fleet-id",
                "x\ntouch PWNED\n#",
                "--dry-run",
            ],
            "is not a fleet id",
        ),
        (
            [
                "submit",
                "cu130",
                "--wheelhouse",
                ".",
                "--nodes",
                "a",
                "--jobs-root",
                "/tmp/j\nx",
                "--fleet-id",
                "ok",
                "--dry-run",
            ],
            "job_dir: Value error",
        ),
        (
            [
                "submit",
                "cu130",
                "--wheelhouse",
                ".",
                "--nodes",
                "a",
                "--jobs-root",
                "/tmp/j",
                "--fleet-id",
                "../up",
                "--dry-run",
            ],
            "is not a fleet id",
        ),
        (
            [
                "submit",
                "cu130",
                "--wheelhouse",
                ".",
                "--nodes",
                "a,a",
                "--jobs-root",
                "/tmp/j",
                "--dry-run",
            ],
            "listed twice: a",
        ),
        (
            [
                "submit",
                "cu130",
                "--wheelhouse",
                ".",
                "--nodes",
                "gpu[3-1]",
                "--jobs-root",
                "/tmp/j",
                "--dry-run",
            ],
            "--nodes 'gpu[3-1]': not a hostlist",
        ),
        (
            [
                "submit",
                "cu130",
                "--wheelhouse",
                ".",
                "--nodes",
                "ok",
                "--nodes",
                "g[1-3",
                "--jobs-root",
                "/tmp/j",
                "--dry-run",
            ],
            "--nodes 'g[1-3': not a hostlist",
        ),
        (
            [
                "submit",
                "cu130",
                "--scheduler",
                "kubernetes",
                "--image",
                "i",
                "--wheelhouse",
                "/w",
                "--nodes",
                "a[]",
                "--jobs-root",
                "/j",
                "--dry-run",
            ],
            "--nodes 'a[]': not a hostlist",
        ),
        (
            [
                "submit",
                "cu130",
                "--wheelhouse",
                ".",
                "--nodes",
                "g[1-2],g[2]",
                "--jobs-root",
                "/tmp/j",
                "--dry-run",
            ],
            "listed twice: g2",
        ),
        (["verdict", "--job-dir", "/nonexistent/job"], "cannot read the fleet spec"),
    ],
)
def test_bad_input_exits_2_and_says_where(argv: list[str], says: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "validators", "fleet", *argv],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
        env={"NO_COLOR": "1", "COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert says in done.stderr


def test_collect_imports_every_pass_record_once(tmp_path: Path) -> None:
    _job(tmp_path / "job")
    store = tmp_path / "team.sqlite"
    argv = [sys.executable, "-m", "validators", "fleet", "collect", "--job-dir", str(tmp_path / "job"),
            "--store", str(store), "--json"]  # fmt: skip
    env = {"NO_COLOR": "1", "PATH": "/usr/bin:/bin"}
    first = subprocess.run(
        argv, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False, env=env
    )
    assert first.returncode == 1, first.stderr  # a lemon, a FAIL and a MISSING node
    out = json.loads(first.stdout)
    # 17 PASS nodes as known-good; the lemon (gpu03) as a candidate record, never a baseline.
    assert (
        len(out["added"]) == 17 and out["present"] == [] and len(out["lemons_as_candidates"]) == 1
    )
    assert (tmp_path / "job" / "verdict.json").is_file() and (
        tmp_path / "job" / "verdict.html"
    ).is_file()
    again = json.loads(
        subprocess.run(
            argv, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False, env=env
        ).stdout
    )
    assert again["added"] == [] and sorted(again["present"]) == sorted(
        out["added"] + out["lemons_as_candidates"]
    )
    with RecordStore.open(store, read_only=True) as opened:
        good = opened.records("cu130", "known-good")
        [lemon] = opened.records("cu130", "candidate")
    assert "gpu03" not in {r.host.hostname for r in good} and len(good) == 17
    assert lemon.host.hostname == "gpu03" and "a lemon" in str(lemon.note)


def test_collect_imports_each_record_as_judged_whatever_its_file_holds_after(
    tmp_path: Path,
) -> None:
    """The judged copy is what enters the store: a record file replaced after judging (here by
    another node's valid record, and by garbage) changes nothing; every imported record is the
    one its node was judged PASS for, byte for byte its canonical content."""
    from validators.fleet.verdict import judge

    spec = _job(tmp_path)
    judged = judge(spec)
    good = judged.known_good()
    swapped, broken = good["gpu07"], good["gpu08"]
    swapped.write_text(good["gpu09"].read_text())
    broken.write_text("{not json")
    for node in good:
        record = judged.read(node)
        assert record is not None and record.record_id == judged.records[node].record_id
        assert record.compute_id() == record.record_id  # the whole content, not the slim copy
        assert record.host.hostname == node and len(record.metrics) == 3
    rows = {n: judged.row(n) for n in good}  # what collect hands the store: no parse, no dump
    for node, row in rows.items():
        record = judged.read(node)
        assert row is not None and record is not None and row.hash_matches()
        assert row.body == canonical_json(record.model_dump(mode="json"))  # the store's own form
        assert row.content_text() == canonical_json(record.content())
    with RecordStore.open(tmp_path / "team.sqlite") as store:
        added = store.add_many(r for r in rows.values() if r is not None).added
    assert sorted(added) == sorted(judged.records[n].record_id for n in good)
    with RecordStore.open(tmp_path / "team.sqlite") as store:  # read back through every check
        assert {store.get(i).host.hostname for i in added} == set(good)


def test_a_kept_copy_changed_after_judging_is_named_not_imported(tmp_path: Path) -> None:
    """The compressed copy kept from judging is checked against the judged id as it is
    imported: a changed one (here one metric value) is not a row, and the store itself refuses
    a body whose content does not hash to its id, adding nothing."""
    import zlib

    from validators.fleet.verdict import judge
    from validators.records.model import StoredBody

    spec = _job(tmp_path)
    judged = judge(spec)
    node = sorted(judged.known_good())[0]
    body = zlib.decompress(judged.bodies[node]).decode()
    changed = body.replace("60.", "61.", 1)
    assert changed != body
    judged.bodies[node] = zlib.compress(changed.encode())
    assert judged.row(node) is None and judged.read(node) is None
    good = judged.records[sorted(judged.known_good())[1]]
    forged = StoredBody(good.record_id, good.stack, good.kind, good.created_at, 1, changed)
    with RecordStore.open(tmp_path / "team.sqlite") as store:
        with pytest.raises(BadInput, match="id does not match its content"):
            store.add_many([judged.row(sorted(judged.known_good())[1]), forged])  # type: ignore[list-item]
        assert store.count() == 0


def _verdict_of(counts: dict[str, int]) -> Any:
    from validators.fleet.verdict import FleetVerdict, LemonMetric, NodeVerdict

    nodes = []
    for kind, n in counts.items():
        for i in range(n):
            lemon = [
                LemonMetric(
                    metric=DECODE,
                    value=54.0,
                    class_median=60.0,
                    worse_by_pct=10.0,
                    threshold_pct=1.1,
                )
            ]
            verdict = "PASS" if kind in ("PASS", "LEMON") else kind
            nodes.append(
                NodeVerdict(
                    node=f"{kind.lower()}{i:05d}",
                    verdict=verdict,
                    record_id="r" * 64 if verdict == "PASS" else None,
                    lemon=lemon if kind == "LEMON" else [],
                    reasons=["x"],
                )
            )  # type: ignore[arg-type]
    tally = {
        "PASS": counts.get("PASS", 0) + counts.get("LEMON", 0),
        "FAIL": counts.get("FAIL", 0),
        "MISSING": counts.get("MISSING", 0),
        "LEMON": counts.get("LEMON", 0),
    }
    return FleetVerdict(
        fleet_id="t",
        stack="cu130",
        expected_nodes=len(nodes),
        counts=tally,
        nodes=nodes,
        classes=[],
    )


@pytest.mark.parametrize(
    ("counts", "rows", "unlisted"),
    [
        ({"PASS": 200}, 200, 0),  # up to 200 nodes: every node
        ({"PASS": 199, "FAIL": 1}, 200, 0),
        ({"PASS": 201}, 0, 201),  # a larger fleet: the nodes that need a look, and a count
        ({"PASS": 9_000, "LEMON": 3, "FAIL": 2, "MISSING": 1}, 6, 9_000),
    ],
)
def test_a_large_fleets_table_lists_the_nodes_that_need_a_look(
    counts: dict[str, int], rows: int, unlisted: int
) -> None:
    from rich.console import Console

    from validators.fleet.render import render_verdict

    console = Console(record=True, width=200, color_system=None)
    render_verdict(_verdict_of(counts), console)
    text = console.export_text()
    listed = [line for line in text.splitlines() if line.startswith("│")]
    assert len(listed) == rows, text[:2000]
    note = (
        f"{unlisted} PASS node(s) not listed above (verdict.json and verdict.html list every node)"
    )
    assert (note in text) == bool(unlisted)
    for kind in ("lemon", "fail", "missing"):
        assert sum(f"{kind}0000" in line for line in listed) == counts.get(kind.upper(), 0)


HOSTILE_REASON = (
    "run 1: \x1b[2J\x1b[H\x1b]0;owned title\x07\x1b[32mFAKE-OK everything fine\x1b[0m \x9b31m"
    " from https://bob:S3CRETPW@idx.example/simple"
)


@pytest.mark.parametrize(
    "env",
    [{"NO_COLOR": "1"}, {}, {"FORCE_COLOR": "1"}],
    ids=["no-color", "piped", "forced-colour"],
)
def test_node_written_control_characters_reach_the_terminal_escaped(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """A node writes `reasons` with a clear-screen, a window title, a fake green line, a C1
    CSI and a credential URL: `fleet verdict` prints every one of them as visible text (piped,
    with NO_COLOR, and with colours forced, where rich adds only its own style codes)."""
    _job(tmp_path)
    write_status(tmp_path, NodeStatus(fleet_id="t", node="bad1", index=18, outcome="FAIL", phase="mark-good", exit_code=1, reasons=[HOSTILE_REASON]))  # fmt: skip
    for extra in ([], ["--json"]):
        done = subprocess.run(
            [sys.executable, "-m", "validators", "fleet", "verdict", "--job-dir", str(tmp_path), *extra],
            cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
            env={**env, "COLUMNS": "200", "PATH": "/usr/bin:/bin"},
        )  # fmt: skip
        assert done.returncode == 1, done.stderr
        out = done.stdout + done.stderr
        for raw in ("\x1b[2J", "\x1b]0;", "\x07", "\x9b", "\x1b[32mFAKE-OK", "S3CRETPW"):
            assert raw not in out, (extra, raw, out[-2000:])
        if not extra:
            assert "\\x1b[2J" in done.stderr and "\\x1b]0;owned title" in done.stderr, done.stderr
        else:
            assert "https://***@idx.example" in done.stdout


def test_direction_controls_in_node_reasons_are_shown_not_obeyed(tmp_path: Path) -> None:
    """Unicode direction controls (an override U+202E, isolates U+2066/U+2069, marks U+200F)
    in a node's `reasons` make a terminal that lays text out both ways show `KO SSAP` as `PASS
    OK`: printed as visible escapes, the text around them kept (a Hebrew letter is text)."""
    from stackgate.safe_text import escape_controls

    reason = "run 1: \u202eKO SSAP\u202c \u2066hidden\u2069 \u200fmark \u05d0"
    assert escape_controls(reason) == (
        "run 1: \\u202eKO SSAP\\u202c \\u2066hidden\\u2069 \\u200fmark \u05d0"
    )
    _job(tmp_path)
    write_status(tmp_path, NodeStatus(fleet_id="t", node="bad1", index=18, outcome="FAIL", phase="mark-good", exit_code=1, reasons=[reason]))  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "validators", "fleet", "verdict", "--job-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
        env={"NO_COLOR": "1", "COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    out = done.stdout + done.stderr
    assert not any(c in out for c in "\u202e\u202c\u2066\u2069\u200f"), ascii(out[-1500:])
    assert "\\u202eKO SSAP" in out, out[-1500:]
