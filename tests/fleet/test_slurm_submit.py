"""`fleet submit` on a real Slurm, the submit side (issue 24 items 4-6, issue 23 section 4):

- a submit Slurm refuses (a partition it does not have) leaves no job folder and no job, and
  the same --fleet-id then submits;
- a fleet larger than MaxArraySize (3 here) is several arrays, each element pinned to its node
  (read back from Slurm), every element `--no-requeue` (Requeue=0: a NODE_FAIL never runs a
  node twice); with --throttle 2 the second array waits for the first (at most 2 at once);
- a fleet larger than MaxJobCount allows is refused before anything is submitted (exit 3,
  naming MaxJobCount), and a pin Slurm refuses is named, not ignored;
- a --jobs-root with a space lands in --output as one argv word; the logs go there;
- the reasons Slurm gives (CANCELLED) are kept in scheduler.json and still in the verdict after
  slurmctld forgot the jobs (MinJobAge) and with no accounting (sacct says it is disabled).
No node does real work here: the arrays are cancelled as soon as they are released.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stackgate import compiler
from stackgate.errors import EnvironmentProblem
from tests.fleet.conftest import FleetStack
from tests.helpers.interpreter import base_python
from tests.helpers.slurm_cluster import slurm_cluster
from validators.fleet.slurm.pin import choose_pin_way, pin_all
from validators.fleet.slurm.states import probe_unavailable

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

NODES = ["n1", "n2", "n3", "n4", "n5"]
ROOT = Path(__file__).resolve().parents[2]


def test_submit_is_all_or_nothing_chunked_pinned_and_reasons_outlive_slurm(
    fleet_stack: FleetStack,
) -> None:
    stack = fleet_stack
    jobs = stack.root / "jobs root"  # a space: must reach sbatch as one word
    submit = [
        "validators", "fleet", "submit", "fleetsmoke",
        "--wheelhouse", str(stack.wheelhouse), "--nodes", "n[1-5]", "--jobs-root", str(jobs),
        "--local-root", str(stack.root / "local" / "{node}"), "--runs", "1",
        "--build-python", base_python(), "--allow-host-mismatch", "--fleet-id", "chunked",
        "--store", str(stack.root / "team.sqlite"), "--throttle", "2",
    ]  # fmt: skip
    extra = ("MaxArraySize=3", "MinJobAge=20")  # the collector runs well within 20 s
    with slurm_cluster(NODES, extra_conf=extra) as cluster:
        env = {"SLURM_CONF": str(cluster.conf)}
        refused = stack.cli(*submit, "--partition", "nosuch", env=env)
        assert refused.returncode == 3, refused.stderr
        assert "nosuch" in refused.stderr or "partition" in refused.stderr.lower()
        assert not jobs.exists() or list(jobs.iterdir()) == [], list(jobs.iterdir())
        assert cluster.queue() == []  # nothing held behind

        out = json.loads(stack.ok(*submit, "--json", env=env))
        submitted = out["submitted"]
        arrays = submitted["arrays"]
        job_dir = jobs / "chunked"
        # Cancel at once: this test is about what Slurm was asked and what it says after.
        cluster.cmd("scancel", *arrays)
        assert len(arrays) == 2 and submitted["offsets"] == [0, 3], submitted
        assert submitted["max_array_size"] == 3
        # one update RPC per element through libslurm (.ci/bootstrap installs libslurm-dev)
        assert submitted["pinned_with"] == "libslurm", submitted
        sbatch = [c for c in submitted["commands"] if c[0] == "sbatch"]
        assert "--array=0-2%2" in sbatch[0] and "--array=0-1%2" in sbatch[1]
        assert f"--dependency=afterany:{arrays[0]}" in sbatch[1]  # --throttle 2 across arrays
        assert not any(a.startswith("--dependency") for a in sbatch[0])
        assert f"--output={job_dir}/logs/validate-%A_%a.out" in sbatch[0]
        assert sbatch[2][2] == f"--dependency=afterany:{arrays[0]}:{arrays[1]}"
        pins = [c[2:] for c in submitted["commands"] if c[:2] == ["scontrol", "update"]]
        assert pins == [
            [f"JobId={arrays[0]}_0", "NodeList=n1"], [f"JobId={arrays[0]}_1", "NodeList=n2"],
            [f"JobId={arrays[0]}_2", "NodeList=n3"], [f"JobId={arrays[1]}_0", "NodeList=n4"],
            [f"JobId={arrays[1]}_1", "NodeList=n5"],
        ]  # fmt: skip
        requested = cluster.cmd(
            "squeue", "-h", "-r", "-t", "all", "-j", ",".join(arrays), "-o", "%i|%n"
        ).stdout
        assert sorted(requested.split()) == sorted(
            f"{arrays[i // 3]}_{i % 3}|{node}" for i, node in enumerate(NODES)
        )  # what Slurm holds: each element requests its own node
        assert sorted(p.name for p in jobs.iterdir()) == ["chunked"]  # no partial folder left
        shown = cluster.cmd("scontrol", "show", "job", "-o", arrays[1]).stdout
        assert "Requeue=0" in shown and "Requeue=1" not in shown, shown

        # The collector (afterany) runs once the arrays ended; it learns the CANCELLED states.
        cluster.wait(lambda: (job_dir / "verdict.json").exists(), 120, "the collector")
        assert cluster.wait_idle(60), cluster.queue()
        learned = json.loads((job_dir / "scheduler.json").read_text())["elements"]
        assert learned["n4"]["job"] == f"{arrays[1]}_0" and learned["n4"]["state"] == "CANCELLED"
        # slurmctld forgets the jobs after MinJobAge (its purge runs about once a minute).
        cluster.wait(lambda: cluster.cmd("scontrol", "show", "job", arrays[0], check=False).returncode != 0,
                     150, "slurmctld to forget the array")  # fmt: skip
        sacct = cluster.cmd("sacct", "-j", arrays[0], check=False)
        assert sacct.returncode != 0, sacct.stdout  # no accounting on this cluster
        done = stack.cli(
            "validators", "fleet", "verdict", "--job-dir", str(job_dir), "--json", env=env
        )
    assert done.returncode == 1, done.stderr
    by = {n["node"]: n for n in json.loads(done.stdout)["nodes"]}
    assert all(n["verdict"] in ("MISSING", "FAIL") for n in by.values()), by
    for node in NODES:  # Slurm's word, kept although Slurm forgot it
        assert str(by[node]["scheduler"]).startswith(f"slurm {learned[node]['job']}: CANCELLED"), (
            by[node]
        )
    assert json.loads((job_dir / "scheduler.json").read_text())["elements"] == learned


def test_a_node_whose_slurmd_dies_mid_job_is_never_pass_nor_validated_twice(
    fleet_stack: FleetStack,
) -> None:
    """Issue 24 item 4: kill n2's slurmd while its element runs. Slurm marks n2 down and the
    element NODE_FAIL; `--no-requeue` keeps it from running n2's step a second time, while the
    first step goes on untracked and writes its PASS. The verdict is FAIL for n2: Slurm's
    record (NODE_FAIL) contradicts the PASS."""
    stack = fleet_stack
    nodes = ["n1", "n2"]
    jobs = stack.root / "jobs"
    with slurm_cluster(nodes, extra_conf=("SlurmdTimeout=5",)) as cluster:
        # n2's engine loads for 30 s (tests/fleet/node_engine.py): slurmctld marks n2 down
        # ~5-10 s after its slurmd dies, while the element still runs, whatever the load.
        env = {"SLURM_CONF": str(cluster.conf), "STACKGATE_TEST_SLOW_START": "n2=30"}
        stack.ok(
            "validators", "fleet", "submit", "fleetsmoke",
            "--wheelhouse", str(stack.wheelhouse), "--nodes", "n1,n2", "--jobs-root", str(jobs),
            "--local-root", str(stack.root / "local" / "{node}"), "--runs", "1",
            "--build-python", base_python(), "--allow-host-mismatch", "--fleet-id", "slurmd-dies",
            "--store", str(stack.root / "team.sqlite"), env=env,
        )  # fmt: skip
        job_dir = jobs / "slurmd-dies"
        n2 = job_dir / "nodes" / "n2"
        cluster.wait(lambda: (n2 / "attempt-0.json").exists(), 120, "n2's step to start")
        slurmd_n2 = cluster.procs[2 + nodes.index("n2")]  # munged, slurmctld, then one per node
        assert "n2" in slurmd_n2.args
        slurmd_n2.kill()
        slurmd_n2.wait(timeout=15)
        cluster.wait(lambda: (job_dir / "verdict.json").exists(), 240, "the collector")
        # The untracked first step finishes on its own; nothing starts a second one.
        cluster.wait(lambda: (n2 / "status.json").exists(), 240, "n2's untracked step to finish")
        array = json.loads((job_dir / "submission.json").read_text())["arrays"][0]
        shown = cluster.cmd("scontrol", "show", "job", "-o", f"{array}_1", check=False).stdout
        done = stack.cli(
            "validators", "fleet", "verdict", "--job-dir", str(job_dir), "--json", env=env
        )
    assert "JobState=NODE_FAIL" in shown and "Restarts=0" in shown, shown
    assert sorted(p.name for p in n2.glob("attempt-*.json")) == ["attempt-0.json"]
    assert json.loads((n2 / "status.json").read_text())["outcome"] == "PASS"  # its own word
    assert done.returncode == 1, done.stderr
    by = {n["node"]: n for n in json.loads(done.stdout)["nodes"]}
    assert by["n1"]["verdict"] == "PASS", by["n1"]
    assert by["n2"]["verdict"] == "FAIL", by["n2"]
    assert any("NODE_FAIL" in r for r in by["n2"]["reasons"]), by["n2"]
    listed = json.loads(
        stack.ok(
            "validators", "records", "list", "--store", str(stack.root / "team.sqlite"), "--json"
        )
    )
    assert [r["record_id"] for r in listed] == [by["n1"]["record_id"]]


def test_a_fleet_over_max_job_count_is_refused_a_refused_pin_is_named_and_drained_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MaxJobCount=4: a 3-node fleet needs 4 jobs (one per element, the collector) and
    slurmctld keeps its count below MaxJobCount (so 5). sbatch alone would sleep and retry for
    ever at the collector; submit says why and submits nothing."""
    (tmp_path / "wheelhouse").mkdir()
    jobs = tmp_path / "jobs"
    submit = [
        sys.executable, "-m", "validators", "fleet", "submit", "cu130",
        "--wheelhouse", str(tmp_path / "wheelhouse"), "--nodes", "n[1-3]",
        "--jobs-root", str(jobs), "--local-root", "/local/{node}", "--fleet-id", "too-many",
    ]  # fmt: skip
    with slurm_cluster(["n1", "n2", "n3"], extra_conf=("MaxJobCount=4",)) as cluster:
        env = {**cluster.env, "STACKGATE_STATE_DIR": str(tmp_path / "state"), "NO_COLOR": "1"}
        done = subprocess.run(
            submit, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 3, done.stderr
        assert "MaxJobCount (4) leaves room for 3 job(s); this fleet needs 4" in done.stderr, (
            done.stderr
        )
        assert "MaxJobCount >= 5" in done.stderr, done.stderr
        assert cluster.queue() == [] and (not jobs.exists() or list(jobs.iterdir()) == [])

        # A pin Slurm refuses (a node it does not have) fails the submit, naming the element:
        # through libslurm (the helper's words kept), through scontrol, and through scontrol
        # when the helper cannot be built (no C compiler on PATH) unless libslurm was asked for.
        monkeypatch.setenv("SLURM_CONF", str(cluster.conf))
        script = tmp_path / "hold.sbatch"
        script.write_text("#!/bin/bash\ntrue\n")
        no_cc = tmp_path / "bin-without-cc"
        no_cc.mkdir()
        for tool in ("scontrol", "squeue", "sbatch", "scancel", "sinfo"):
            (no_cc / tool).symlink_to(shutil.which(tool) or tool)
        # One array for all three (MaxJobCount=4 here): element 0 is pinned to another good
        # node each time, element 1 to a node Slurm does not have.
        array = cluster.cmd(
            "sbatch", "--parsable", "--hold", "--array=0-1", f"--output={tmp_path}/%A_%a.out",
            str(script),
        ).stdout.strip()  # fmt: skip
        for how, path, good, words in [
            ("libslurm", None, "n1", "Invalid node name specified"),
            ("scontrol", None, "n2", None),
            ("auto", str(no_cc), "n3", None),
        ]:
            if path is not None:
                # No C compiler here: the fixed list names only an absent file (PATH is never
                # searched for one, so a PATH without cc no longer stands for this).
                monkeypatch.setenv("PATH", path)
                monkeypatch.setattr(compiler, "SYSTEM_COMPILERS", (str(no_cc / "cc"),))
            pins = [
                ["scontrol", "update", f"JobId={array}_0", f"NodeList={good}"],
                ["scontrol", "update", f"JobId={array}_1", "NodeList=n9"],
            ]
            with choose_pin_way(True, how) as way, pytest.raises(EnvironmentProblem) as refused:
                assert way.way == ("scontrol" if path else how)
                pin_all(pins, way)
            assert refused.value.message == "Slurm did not pin 1 of 2 element(s) to their node"
            assert refused.value.details[0] == f"{array}_1: wanted n9, Slurm holds no node", (
                refused.value.details
            )
            if words:
                assert f"{array}_1: {words}" in refused.value.details, refused.value.details
            held = cluster.cmd("squeue", "-h", "-r", "-j", array, "-o", "%i|%n").stdout.split()
            assert f"{array}_0|{good}" in held, (how, held)  # the good pin went through
        with pytest.raises(EnvironmentProblem) as forced, choose_pin_way(True, "libslurm"):
            pass  # no C compiler at the fixed paths
        assert "--pin-with libslurm: the pin helper cannot be built here: no C compiler" in (
            forced.value.message
        )
        cluster.cmd("scancel", array)
        monkeypatch.undo()
        monkeypatch.setenv("SLURM_CONF", str(cluster.conf))

        # The probe before pinning: one `sinfo` line per state, hostlists expanded by Slurm.
        cluster.cmd("scontrol", "update", "NodeName=n2", "State=DRAIN", "Reason=bad fan")
        assert probe_unavailable(["n1", "n2", "n3", "n9"]) == {
            "n2": "not submitted: slurm says drained (bad fan)",
            "n9": "not a node of this Slurm cluster (sinfo does not list it)",
        }


def test_a_fleet_that_just_fits_max_job_count_is_submitted(tmp_path: Path) -> None:
    """MaxJobCount=5, 3 nodes: the 3 elements and the collector stay below 5, so Slurm takes
    them and so does submit's check (the refusal above is not one job too strict)."""
    (tmp_path / "wheelhouse").mkdir()
    submit = [
        sys.executable, "-m", "validators", "fleet", "submit", "cu130",
        "--wheelhouse", str(tmp_path / "wheelhouse"), "--nodes", "n[1-3]",
        "--jobs-root", str(tmp_path / "jobs"), "--local-root", "/local/{node}", "--fleet-id", "fits", "--json",
    ]  # fmt: skip
    with slurm_cluster(["n1", "n2", "n3"], extra_conf=("MaxJobCount=5",)) as cluster:
        env = {**cluster.env, "STACKGATE_STATE_DIR": str(tmp_path / "state"), "NO_COLOR": "1"}
        done = subprocess.run(
            submit, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 0, done.stderr
        submitted = json.loads(done.stdout)["submitted"]
        cluster.cmd("scancel", *submitted["arrays"], submitted["collector_job"])
    assert len(submitted["arrays"]) == 1 and submitted["collector_job"].isdigit()
