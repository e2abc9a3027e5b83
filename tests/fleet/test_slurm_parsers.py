"""Slurm's outputs as stackgate reads them, on outputs recorded from the real one-host cluster
(tests/helpers/slurm_cluster.py): an array of 3 pinned elements (one completed, one exited 3,
one cancelled while held) and `sinfo` with a drained node and a name Slurm does not know."""

from __future__ import annotations

from pathlib import Path

from validators.fleet.slurm.states import parse_show_job, unavailable_nodes
from validators.fleet.slurm.submission import _released

DATA = Path(__file__).parent / "data"


def test_elements_of_an_array_with_their_states() -> None:
    states = parse_show_job((DATA / "scontrol-show-job-array.txt").read_text())
    assert [(e.task, e.state, e.exit_code) for e in states] == [
        (0, "COMPLETED", "0:0"),
        (1, "FAILED", "3:0"),
        (2, "CANCELLED", "0:0"),
    ]
    assert states[0].node == "n1" and states[1].node == "n2"
    assert states[2].reason == "JobHeldUser"


def test_unavailable_nodes_say_why() -> None:
    text = (DATA / "sinfo-nodes.txt").read_text()
    assert unavailable_nodes(["n1", "n2", "n3", "n9"], text) == {
        "n3": "not submitted: slurm says drained (bad_gpu_fan)",
        "n9": "not a node of this Slurm cluster (sinfo does not list it)",
    }
    assert unavailable_nodes(["n1"], "n1|idle*|none\n") == {"n1": "not submitted: slurm says idle*"}


def test_release_with_an_element_already_ended_is_a_release() -> None:
    assert _released("1_0-1: No error\n1_2: Job has already finished\n")
    assert not _released("scontrol: error: Invalid job id specified\n")
    assert not _released("")


def test_dry_run_without_pinning_submits_no_node_updates(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    argv = [sys.executable, "-m", "validators", "fleet", "submit", "cu130", "--wheelhouse", str(tmp_path),
            "--nodes", "gpu[1-3]", "--jobs-root", str(tmp_path / "jobs"), "--throttle", "2", "--gres", "gpu:8",
            "--no-pin", "--dry-run", "--json"]  # fmt: skip
    done = subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert [c[:2] for c in out["commands"]] == [["sbatch", "--parsable"], ["sbatch", "--parsable"], ["scontrol", "release"]]
    assert "--array=0-2%2" in out["commands"][0] and "--export=ALL,STACKGATE_FLEET_OFFSET=0" in out["commands"][0]
    script = next(v for k, v in out["files"].items() if k.endswith("validate.sbatch"))
    assert "#SBATCH --gres=gpu:8" in script and "#SBATCH --no-requeue" in script
    assert not (tmp_path / "jobs").exists()


def test_sacct_elements_for_arrays_slurmctld_forgot() -> None:
    """`sacct -n -P -X -o JobID,State,ExitCode,NodeList,Reason -j 7,9` output, written by hand
    in sacct's parsable format (the CI cluster has no accounting database to record one): the
    pending remainder `9_[2-3]` and a `CANCELLED by 0` state as sacct prints them."""
    from validators.fleet.slurm.states import parse_sacct

    text = (
        "7_0|COMPLETED|0:0|n1|None\n"
        "7_1|NODE_FAIL|0:0|n2|None\n"
        "9_0|CANCELLED by 0|0:15|n4|None\n"
        "9_1|CANCELLED by 0|0:0|None assigned|JobHeldUser\n"
        "9_[2-3]|PENDING|0:0|None assigned|JobHeldUser\n"
    )
    got = [(e.job, e.state, e.exit_code, e.node, e.reason, e.source) for e in parse_sacct(text)]
    assert got == [
        ("7_0", "COMPLETED", "0:0", "n1", None, "sacct"),
        ("7_1", "NODE_FAIL", "0:0", "n2", None, "sacct"),
        ("9_0", "CANCELLED", "0:15", "n4", None, "sacct"),
        ("9_1", "CANCELLED", "0:0", None, "JobHeldUser", "sacct"),
    ]
