"""Every file of a node is untrusted input: a bad one makes that node FAIL, naming the file,
never the fleet (issue 24 items 1, 3, 4; issue 23 section 4, the fleet job folder).

Real job folders (real records, status files, attempt claims, gzip listings) written by the
same code the nodes run, then damaged or forged the way a broken disk or another writer would.
"""

from __future__ import annotations

import gzip
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fleet.test_verdict import H200, _fleet, _job, _record
from validators.fleet.elements import Element, Submission
from validators.fleet.status import NodeStatus, claim_attempt, node_dir, write_status
from validators.fleet.verdict import judge

ROOT = Path(__file__).resolve().parents[2]


def _collect(job: Path, store: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "validators", "fleet", "collect", "--job-dir", str(job), "--store", str(store), "--json"]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
                          env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin"})  # fmt: skip


def test_a_truncated_status_or_record_fails_that_node_and_collect_imports_the_rest(tmp_path: Path) -> None:
    job = tmp_path / "job"
    _job(job)
    status = node_dir(job, "gpu01") / "status.json"
    status.write_bytes(status.read_bytes()[:40])
    record = next((job / "records" / "cu130").glob("gpu02-*.json"))
    record.write_bytes(record.read_bytes()[:100])
    done = _collect(job, tmp_path / "team.sqlite")
    assert done.returncode == 1, done.stderr  # a verdict (nodes failed), not bad input (2)
    out = json.loads(done.stdout)
    by = {n["node"]: n for n in out["nodes"]}
    assert by["gpu01"]["verdict"] == "FAIL" and str(status) in by["gpu01"]["reasons"][0]
    assert by["gpu02"]["verdict"] == "FAIL" and str(record) in by["gpu02"]["reasons"][0]
    assert len(out["added"]) == 15  # 17 healthy PASS nodes less the two damaged ones
    assert (job / "verdict.json").is_file()
    outputs = {}
    for action, code in (("status", 0), ("verdict", 1)):
        again = subprocess.run([sys.executable, "-m", "validators", "fleet", action, "--job-dir", str(job), "--json"],
                               cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
                               env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin"})  # fmt: skip
        assert again.returncode == code, again.stderr
        outputs[action] = {r["node"]: r for r in json.loads(again.stdout)["nodes"]}
    assert outputs["status"]["gpu01"]["reported"] == "UNREADABLE" and str(status) in outputs["status"]["gpu01"]["problem"]
    assert outputs["verdict"]["gpu01"]["verdict"] == "FAIL" and outputs["status"]["gpu00"]["reported"] == "PASS"


def test_forged_statuses_do_not_turn_a_failed_or_missing_node_into_pass(tmp_path: Path) -> None:
    spec = _job(tmp_path)
    good = json.loads((node_dir(tmp_path, "gpu00") / "status.json").read_text())
    # bad1 FAILed: a forged PASS naming gpu00's record (its own node name and index).
    forged = {**good, "node": "bad1", "index": 18}
    (node_dir(tmp_path, "bad1") / "status.json").write_text(json.dumps(forged))
    # gone1 never ran: a forged PASS with a claim, naming gpu00's record.
    claim_attempt(tmp_path, "gone1", None, 0)
    write_status(tmp_path, NodeStatus.model_validate({**good, "node": "gone1", "index": 19}))
    # gpu04: a status of another fleet run, and gpu05 one that names another node.
    other = json.loads((node_dir(tmp_path, "gpu04") / "status.json").read_text())
    (node_dir(tmp_path, "gpu04") / "status.json").write_text(json.dumps({**other, "fleet_id": "older-run"}))
    other = json.loads((node_dir(tmp_path, "gpu05") / "status.json").read_text())
    (node_dir(tmp_path, "gpu05") / "status.json").write_text(json.dumps({**other, "node": "gpu06"}))
    by = {n.node: n for n in judge(spec).verdict.nodes}
    assert by["bad1"].verdict == "FAIL" and "made on host 'gpu00', not on 'bad1'" in by["bad1"].reasons[0]
    assert by["gone1"].verdict == "FAIL" and "gpu00" in by["gone1"].reasons[0]
    assert by["gpu04"].verdict == "FAIL" and "names fleet run 'older-run'" in by["gpu04"].reasons[0]
    assert by["gpu05"].verdict == "FAIL" and "names node 'gpu06'" in by["gpu05"].reasons[0]
    assert by["gpu00"].verdict == "PASS"


def test_a_status_must_come_from_the_nodes_own_slurm_element(tmp_path: Path) -> None:
    spec = _job(tmp_path)
    submission = Submission(scheduler="slurm", arrays=["40", "41"], offsets=[0, 10])
    for node, index in (("gpu00", 0), ("gpu11", 11)):
        path = node_dir(tmp_path, node) / "status.json"
        data = json.loads(path.read_text())
        path.write_text(json.dumps({**data, "scheduler_job": submission.element_of(index)}))
    elements = {
        "gpu00": Element(job="40_0", state="COMPLETED", exit_code="0:0", node="gpu00"),
        # Slurm says the element failed (the node step exits 1 on FAIL): a PASS is forged.
        "gpu11": Element(job="41_1", state="FAILED", exit_code="1:0", node="gpu11"),
    }
    by = {n.node: n for n in judge(spec, elements=elements, submission=submission).verdict.nodes}
    assert by["gpu00"].verdict == "PASS"
    assert by["gpu11"].verdict == "FAIL" and "Slurm recorded element 41_1 as FAILED" in by["gpu11"].reasons[0]
    # Without the scheduler's id in the status the node is not bound to its element.
    assert by["gpu01"].verdict == "FAIL" and "the node's element is 40_1" in by["gpu01"].reasons[0]


def test_a_second_attempt_in_one_run_fails_the_node_saying_so(tmp_path: Path) -> None:
    spec = _job(tmp_path)
    claim = claim_attempt(tmp_path, "gpu07", "9_7", 1)
    assert claim.attempt == 1
    by = {n.node: n for n in judge(spec).verdict.nodes}
    assert by["gpu07"].verdict == "FAIL" and "2 attempts in one fleet run" in by["gpu07"].reasons[0]


def _listing(path: Path, files: dict[str, str]) -> None:
    with gzip.open(path, "wt") as handle:
        handle.write("# stackgate tree listing\n")
        for rel, digest in sorted(files.items()):
            handle.write(f"F\t{digest}\t{rel}\n")


def test_a_node_whose_env_differs_from_its_peers_fails_naming_the_files(tmp_path: Path) -> None:
    spec = _job(tmp_path)
    files = {"lib/python3.12/site-packages/tiny/__init__.py": "11" * 32, "bin/python": "22" * 32}
    for node in spec.nodes:
        if node_dir(tmp_path, node).is_dir():
            _listing(node_dir(tmp_path, node) / "tree.tsv.gz", files)
    # gpu09: built from a damaged cache; its record says so by its tree hash.
    rng = random.Random(1)
    record = _record("gpu09", H200, _fleet(rng, 1, {})["gpu00"], tree="b" * 64)
    rel = f"records/cu130/gpu09-{record.short_id}.json"
    (tmp_path / rel).write_text(record.to_json())
    status = json.loads((node_dir(tmp_path, "gpu09") / "status.json").read_text())
    (node_dir(tmp_path, "gpu09") / "status.json").write_text(json.dumps({**status, "record_id": record.record_id, "record_file": rel}))
    _listing(node_dir(tmp_path, "gpu09") / "tree.tsv.gz", {**files, "lib/python3.12/site-packages/tiny/__init__.py": "33" * 32})
    judged = judge(spec)
    by = {n.node: n for n in judged.verdict.nodes}
    assert by["gpu09"].verdict == "FAIL"
    assert "differs from its peers' aaaaaaaaaaaaaaaa" in by["gpu09"].reasons[0]
    assert any("differs (vs gpu00): lib/python3.12/site-packages/tiny/__init__.py" in r for r in by["gpu09"].reasons)
    assert "gpu09" not in judged.records
    [env] = judged.verdict.envs
    assert env.differing == ["gpu09"] and env.trees == {"a" * 64: 17, "b" * 64: 1}


def test_the_html_page_and_the_table_carry_no_raw_markup(tmp_path: Path) -> None:
    _job(tmp_path)
    html = tmp_path / "v.html"
    done = subprocess.run([sys.executable, "-m", "validators", "fleet", "verdict", "--job-dir", str(tmp_path), "--html", str(html)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
                          env={"PATH": "/usr/bin:/bin", "FORCE_COLOR": "1", "COLUMNS": "250"})  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "[green]" not in done.stderr and "[/]" not in done.stderr and "[bold" not in done.stderr
    assert "\x1b[" in done.stderr  # styled for real
    page = html.read_text()
    assert "gpu03" in page and "Lemons (1)" in page and "Failures (2)" in page and "<script" not in page


def test_a_fleet_judged_by_worker_processes_gets_the_same_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Large fleets are judged in chunks by a process pool (validators/fleet/verdict.py); the
    verdict is the one a single process gives."""
    import validators.fleet.verdict as verdict_module

    spec = _job(tmp_path)
    (node_dir(tmp_path, "gpu01") / "status.json").write_text("{")  # one bad file among them
    alone = judge(spec)
    monkeypatch.setattr(verdict_module, "PARALLEL_FROM", 1)
    monkeypatch.setattr(verdict_module, "_CHUNK", 3)
    pooled = judge(spec)
    assert pooled.verdict == alone.verdict and pooled.files == alone.files
    assert pooled.verdict.counts == {"PASS": 17, "FAIL": 2, "MISSING": 1, "LEMON": 1}
