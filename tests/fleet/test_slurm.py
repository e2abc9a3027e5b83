"""`fleet submit` against a real Slurm (munged + slurmctld + five slurmd on this machine).

Five nodes, five fates:
- n1 is healthy: builds offline from the wheelhouse, serves and passes twice, is marked good
  -> PASS;
- n2's local disk is broken (its node-local folder is a file) -> FAIL in the build step;
- n3 has a drifted env on its local disk (a distribution the lock does not have): the builder
  refuses to reuse it -> FAIL in the build step, in the builder's words;
- n4 is drained for repair: submit leaves it out (an element pinned to it would hold back the
  others, see validators/fleet/slurm/submission.py) -> MISSING, with Slurm's reason;
- n5's engine answers wrongly (tests/fleet/node_engine.py) -> FAIL, naming the serve-bench
  correctness check that failed in both runs.
The collector (afterany) imports n1's record into the team's store and writes the verdict.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fleet.conftest import FleetStack
from tests.helpers.interpreter import base_python
from tests.helpers.slurm_cluster import slurm_cluster

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

NODES = ["n1", "n2", "n3", "n4", "n5"]


def _drift_env_of_n3(stack: FleetStack, local: Path) -> None:
    built = stack.ok(
        "builder",
        "build",
        "fleetsmoke",
        "--wheelhouse",
        str(stack.wheelhouse),
        "--venv-root",
        str(local / "n3" / "envs"),
        "--python",
        base_python(),
        "--json",
    )
    env = Path(json.loads(built)["env"])
    site = next(env.glob("lib/python*/site-packages"))
    stray = site / "strayed-1.0.dist-info"
    stray.mkdir()
    (stray / "METADATA").write_text("Metadata-Version: 2.1\nName: strayed\nVersion: 1.0\n")


def test_fleet_array_and_collector_on_real_slurm(fleet_stack: FleetStack) -> None:
    stack = fleet_stack
    local = stack.root / "local"
    local.mkdir()
    (local / "n2").write_text("not a folder: this node's local disk is broken\n")
    _drift_env_of_n3(stack, local)
    jobs = stack.root / "jobs"
    store = stack.root / "team.sqlite"
    submit = [
        "validators", "fleet", "submit", "fleetsmoke",
        "--wheelhouse", str(stack.wheelhouse),
        "--nodes", "n[1-5]",
        "--jobs-root", str(jobs),
        "--local-root", str(local / "{node}"),
        "--runs", "2",
        "--build-python", base_python(),
        "--allow-host-mismatch",
        "--store", str(store),
        "--throttle", "3",
        "--fleet-id", "ci-run",
    ]  # fmt: skip
    with slurm_cluster(NODES) as cluster:
        env = {"SLURM_CONF": str(cluster.conf)}
        cluster.cmd(
            "scontrol", "update", "NodeName=n4", "State=DRAIN", "Reason=out_for_repair"
        )  # fmt: skip

        dry = json.loads(stack.ok(*submit, "--dry-run", "--json", env=env))
        assert not jobs.exists() and not cluster.queue()  # a dry run touches nothing
        script = dry["files"]["slurm/validate.sbatch"]
        assert dry["files"]["fleet.json"].count("out_for_repair") == 1
        assert "#SBATCH --exclusive" in script and "#SBATCH --no-requeue" in script
        assert dry["commands"][0][:4] == ["sbatch", "--parsable", "--hold", "--array=0-3%3"]
        assert dry["commands"][1] == ["scontrol", "update", "JobId=<ARRAY_JOB_ID>_0", "NodeList=n1"]
        assert dry["commands"][-2][2] == "--dependency=afterany:<ARRAY_JOB_ID>"

        out = json.loads(stack.ok(*submit, "--json", env=env))
        job_dir = jobs / "ci-run"
        [array] = out["submitted"]["arrays"]
        # The very scripts the dry run printed were submitted.
        assert (job_dir / "slurm" / "validate.sbatch").read_text() == script

        def reported() -> int:
            return len(list((job_dir / "nodes").glob("*/status.json")))

        cluster.wait(lambda: reported() == 4, 400, "n1, n2, n3, n5 report")
        states = cluster.cmd("scontrol", "show", "job", "-o", array).stdout
        assert "NodeList=n5" in states and "NodeList=n4" not in states
        cluster.wait(lambda: (job_dir / "verdict.json").exists(), 120, "the collector")
        assert cluster.wait_idle(60), cluster.queue()
        collect_log = next((job_dir / "logs").glob("collect-*.out")).read_text()
        status = json.loads(
            stack.ok("validators", "fleet", "status", "--job-dir", str(job_dir), "--json", env=env)
        )
        rows = {r["node"]: r for r in status["nodes"]}
        assert rows["n1"]["reported"] == "PASS" and "COMPLETED" in rows["n1"]["scheduler"]
        # A node whose validation failed is a failed element too (exit 1), seen from Slurm.
        assert rows["n5"]["reported"] == "FAIL" and "FAILED, exit 1:0" in rows["n5"]["scheduler"]
        assert rows["n4"] == {
            "node": "n4", "reported": None, "phase": None,
            "scheduler": "not submitted: slurm says drained (out_for_repair)",
        }  # fmt: skip

    verdict = json.loads((job_dir / "verdict.json").read_text())
    by_node = {n["node"]: n for n in verdict["nodes"]}
    assert [n["node"] for n in verdict["nodes"]] == NODES
    assert verdict["counts"] == {"PASS": 1, "FAIL": 3, "MISSING": 1, "LEMON": 0}

    n1 = by_node["n1"]
    assert n1["verdict"] == "PASS" and n1["record_id"]
    n2 = by_node["n2"]
    assert n2["verdict"] == "FAIL" and n2["phase"] == "build"
    # n2's env root is a file: the build names it (stackgate's own message, or the OS's)
    assert any(
        "is not a folder" in r or "Not a directory" in r or "exists" in r for r in n2["reasons"]
    ), n2
    n3 = by_node["n3"]
    assert n3["verdict"] == "FAIL" and n3["phase"] == "build"
    assert any("files changed since" in r for r in n3["reasons"]), n3
    assert any("strayed-1.0.dist-info" in r for r in n3["reasons"]), n3
    n5 = by_node["n5"]
    assert n5["verdict"] == "FAIL" and n5["phase"] == "mark-good", n5
    failed = {c["check"]: c for c in n5["failed_checks"]}
    assert any("correct" in c for c in failed), failed
    assert all(c["runs"] == 2 for c in failed.values())
    n4 = by_node["n4"]
    assert n4["verdict"] == "MISSING"
    assert any("drained" in r and "out_for_repair" in r for r in n4["reasons"]), n4
    assert "n4" in collect_log and "MISSING" in collect_log

    # The collector imported exactly n1's record into the team's store, fingerprinted as n1.
    listed = json.loads(stack.ok("validators", "records", "list", "--store", str(store), "--json"))
    assert [r["record_id"] for r in listed] == [n1["record_id"]]
    shown = json.loads(stack.ok("validators", "records", "show", n1["record_id"], "--store", str(store), "--json"))
    assert shown["host"]["hostname"] == "n1"

    # `fleet verdict` reads the same folder to the same verdict, and exits 1 (not all PASS).
    again = stack.cli("validators", "fleet", "verdict", "--job-dir", str(job_dir), "--json")
    assert again.returncode == 1, again.stderr
    assert json.loads(again.stdout)["counts"] == verdict["counts"]
    Path(stack.root / "verdict.txt").write_text(collect_log)


@pytest.mark.alone
def test_a_slow_node_among_healthy_peers_is_a_lemon(fleet_stack: FleetStack) -> None:
    """Six nodes pass every check; n6's engine streams 30% slower (tests/fleet/node_engine.py).
    The verdict keeps it PASS and flags it a lemon on decode speed; the collector exits 1."""
    stack = fleet_stack
    nodes = ["n1", "n2", "n3", "n4", "n6", "n7"]
    jobs = stack.root / "jobs"
    with slurm_cluster(nodes) as cluster:
        env = {"SLURM_CONF": str(cluster.conf)}
        stack.ok(
            "validators", "fleet", "submit", "fleetsmoke",
            "--wheelhouse", str(stack.wheelhouse), "--nodes", ",".join(nodes),
            "--jobs-root", str(jobs), "--local-root", str(stack.root / "local" / "{node}"),
            "--runs", "2", "--build-python", base_python(), "--allow-host-mismatch",
            "--store", str(stack.root / "team.sqlite"), "--throttle", "2", "--fleet-id", "lemons",
            env=env,
        )  # fmt: skip
        job_dir = jobs / "lemons"
        cluster.wait(lambda: (job_dir / "verdict.json").exists(), 600, "the collector")
        assert cluster.wait_idle(60), cluster.queue()
        states = cluster.cmd("scontrol", "show", "job", "-o", "--details").stdout
    verdict = json.loads((job_dir / "verdict.json").read_text())
    by_node = {n["node"]: n for n in verdict["nodes"]}
    assert all(n["verdict"] == "PASS" for n in verdict["nodes"]), verdict
    [cls] = verdict["classes"]
    assert sorted(cls["nodes"]) == sorted(nodes) and cls["noise"], cls
    lemon = {m["metric"]: m for m in by_node["n6"]["lemon"]}
    decode = "serve-bench.single_stream/single_stream_decode_tok_s"
    assert decode in lemon, by_node["n6"]
    assert 20 < lemon[decode]["worse_by_pct"] < 40  # 30% slower, give or take the noise
    # The collector job's exit code is the verdict's: Slurm records the fleet as failed.
    collector = [line for line in states.splitlines() if "collect" in line]
    assert collector and "ExitCode=1:0" in collector[0], collector

    # The lemon's record is kept as a candidate, never a known-good baseline (issue 24 item 2):
    # gating the lemon's own slow runs against the store compares them with a healthy node.
    store = str(stack.root / "team.sqlite")
    listed = json.loads(stack.ok("validators", "records", "list", "--store", store, "--json"))
    good = {r["record_id"] for r in listed if r["kind"] == "known-good"}
    assert by_node["n6"]["record_id"] not in good and len(good) == len(nodes) - sum(
        bool(n["lemon"]) for n in verdict["nodes"]
    ), listed
    runs = sorted((job_dir / "nodes" / "n6").glob("run-*.json"))
    gate = stack.cli("validators", "gate", "fleetsmoke", *(a for r in runs for a in ("--run", str(r))),
                     "--store", store, "--min-repeats", "2", "--json")  # fmt: skip
    assert gate.returncode == 1, gate.stderr
    decided = json.loads(gate.stdout)
    assert decided["baseline"] != decided["candidate"], decided["baseline"]
    # Two runs a side cannot reach the family-wise goal: the 30% slower decode is refused as
    # INCONCLUSIVE (exit 1 above), never passed.
    slow = [m["status"] for m in decided["metrics"] if m["key"].endswith(decode.split("/")[1])]
    assert decided["verdict"] in ("INCONCLUSIVE", "REFUSED"), decided["verdict"]
    assert slow and set(slow) <= {"INCONCLUSIVE", "REGRESSION"}, (slow, gate.stdout[-3000:])
