"""Slurm's outputs as stackgate reads them, on outputs recorded from the real one-host cluster
(tests/fleet/slurm_cluster.py): an array of 3 pinned elements (one completed, one exited 3,
one cancelled while held) and `sinfo` with a drained node and a name Slurm does not know."""

from __future__ import annotations

from pathlib import Path

from validators.fleet.slurm import _released, parse_show_job, unavailable_nodes

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
