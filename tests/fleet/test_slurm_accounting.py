"""`sacct` with real job accounting (issue 24 item 5): slurmdbd on MariaDB, one host.

An array's elements end (COMPLETED, FAILED with exit 3, CANCELLED while held); slurmctld
forgets them after MinJobAge; what Slurm said about each is then read from `sacct` and
merged into scheduler.json. The cluster without accounting (sacct disabled, reasons kept from
scontrol) is tests/fleet/test_slurm_submit.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.helpers.slurm_cluster import ACCOUNTING, missing_tools, slurm_cluster
from validators.fleet.elements import ELEMENTS_FILENAME, Submission, learn
from validators.fleet.slurm import states as slurm_states
from validators.fleet.spec import FleetSpec

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def test_elements_slurm_forgot_are_read_from_sacct(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Element 0 completes, 1 exits 3, 2 is cancelled while it runs, 3 is cancelled while
    held: Slurm 22.05 never records an element that never became eligible, so sacct does not
    list it and nothing is learned for its node (its reason is whatever scontrol said before)."""
    missing = missing_tools(ACCOUNTING)
    if missing:
        pytest.skip(f"Slurm accounting tools missing: {', '.join(missing)} (apt-get install slurmdbd mariadb-server)")
    script = tmp_path / "element.sbatch"
    script.write_text('#!/bin/bash\n[ "$SLURM_ARRAY_TASK_ID" = 1 ] && exit 3\n[ "$SLURM_ARRAY_TASK_ID" = 2 ] && sleep 300\ntrue\n')
    nodes = ["n1", "n2", "n3", "n4"]
    spec = FleetSpec(
        fleet_id="acct", stack="cu130", stack_name="cu130", wheelhouse="/w", nodes=nodes,
        job_dir=str(tmp_path / "job"), checkout=str(ROOT), python=sys.executable, local_root="/l",
    )  # fmt: skip
    (tmp_path / "job").mkdir()
    with slurm_cluster(nodes, extra_conf=("MinJobAge=5",), accounting=True) as cluster:
        monkeypatch.setenv("SLURM_CONF", str(cluster.conf))
        array = cluster.cmd("sbatch", "--parsable", "--hold", "--array=0-3", f"--output={tmp_path}/%A_%a.out", str(script)).stdout.strip()
        cluster.cmd("scancel", f"{array}_3")
        cluster.cmd("scontrol", "release", array, check=False)  # exit 1: element 3 has ended
        running = lambda: cluster.cmd("squeue", "-h", "-t", "R", "-j", f"{array}_2", "-o", "%i").stdout.strip()  # noqa: E731
        cluster.wait(lambda: running() == f"{array}_2", 60, "element 2 to run")
        cluster.cmd("scancel", f"{array}_2")
        cluster.wait(lambda: not cluster.queue(), 60, "the elements to end")
        # slurmctld forgets ended jobs after MinJobAge (its purge runs about once a minute).
        cluster.wait(lambda: cluster.cmd("scontrol", "show", "job", array, check=False).returncode != 0,
                     150, "slurmctld to forget the array")  # fmt: skip
        states = {e.job: e for e in slurm_states.element_states([array])}
        merged = learn(spec, Submission(scheduler="slurm", arrays=[array], offsets=[0]))
    assert sorted(states) == [f"{array}_0", f"{array}_1", f"{array}_2"]  # not 3: never eligible
    assert {e.source for e in states.values()} == {"sacct"}
    done, failed, cancelled = (states[f"{array}_{i}"] for i in range(3))
    assert (done.state, done.exit_code) == ("COMPLETED", "0:0") and done.node in nodes
    assert (failed.state, failed.exit_code) == ("FAILED", "3:0") and failed.node in nodes
    assert cancelled.state == "CANCELLED" and cancelled.node in nodes, cancelled
    kept = json.loads((tmp_path / "job" / ELEMENTS_FILENAME).read_text())["elements"]
    assert {node: (e["job"], e["state"], e["source"]) for node, e in kept.items()} == {
        "n1": (f"{array}_0", "COMPLETED", "sacct"),
        "n2": (f"{array}_1", "FAILED", "sacct"),
        "n3": (f"{array}_2", "CANCELLED", "sacct"),
    }
    assert merged["n2"].note() == f"slurm {array}_1: FAILED, exit 3:0"
