"""The fleet's job folder is shared: every node can write it. A node's writes (its attempt
claim, status, logs, run reports) reach `nodes/<node>/` without following a symlink, and the
verdict's reads (status.json, record files, tree listings) read regular files only.

Real racers (tests/helpers/swap.py) swap `nodes/<node>` for a symlink to a victim folder in a
loop while a node writes there; planted links to a secret file are never read."""

from __future__ import annotations

import os
from pathlib import Path

from stackgate import dirfd
from stackgate.envtree import read_listing_file
from stackgate.errors import StackgateError
from tests.helpers.swap import racing
from validators.fleet.status import (
    NODES_DIR,
    STATUS_FILENAME,
    NodeStatus,
    claim_attempt,
    open_node_dir,
    read_node,
    write_status,
)

TRIES = 400
SECRET = "root:$6$planted-secret-hash:19000:0:99999:7:::\n"


def _status(node: str, i: int) -> NodeStatus:
    return NodeStatus(
        fleet_id="f1", node=node, outcome="PASS", phase="done", exit_code=0, reasons=[f"t{i}"]
    )


def test_a_node_never_writes_into_a_folder_swapped_for_a_symlink(tmp_path: Path) -> None:
    job = tmp_path / "job"
    victim = tmp_path / "victim"
    victim.mkdir()
    write_status(job, _status("n1", 0))
    ok = refused = 0
    with racing(job / NODES_DIR / "n1", victim) as racer:
        for i in range(TRIES):
            try:
                write_status(job, _status("n1", i))
                claim_attempt(job, "n1", None, 0)
                with dirfd.opened(open_node_dir(job, "n1")) as fd:
                    dirfd.append_at(fd, "build.log", b"x\n", where="build.log")
                    dirfd.write_at(fd, "run-1.json", b"{}")
                ok += 1
            except StackgateError:
                refused += 1
    assert os.listdir(victim) == []
    assert racer.swaps > 0 and ok > 0 and ok + refused == TRIES, (racer.swaps, ok, refused)


def test_a_planted_symlink_in_the_fleet_folder_is_never_read(tmp_path: Path) -> None:
    job = tmp_path / "job"
    secret = tmp_path / "shadow"
    secret.write_text(SECRET)
    # status.json a link to the secret
    (job / NODES_DIR / "n1").mkdir(parents=True)
    (job / NODES_DIR / "n1" / STATUS_FILENAME).symlink_to(secret)
    got = read_node(job, "n1")
    assert got.status is None and got.problem is not None
    assert "a symlink" in got.problem and "planted-secret" not in got.problem
    # the node's folder itself a link to a folder holding a valid status
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / STATUS_FILENAME).write_text(_status("n2", 0).model_dump_json())
    (job / NODES_DIR / "n2").symlink_to(elsewhere)
    got = read_node(job, "n2")
    assert got.status is None and got.problem is not None and "symlink" in got.problem
    # control: the same status as a regular file reads
    (job / NODES_DIR / "n3").mkdir()
    (job / NODES_DIR / "n3" / STATUS_FILENAME).write_text(_status("n3", 0).model_dump_json())
    assert read_node(job, "n3").status is not None
    # a tree listing reached through a symlinked folder is not read
    import gzip

    listing = elsewhere / "tree.tsv.gz"
    listing.write_bytes(gzip.compress(b"f\tab\tx.py\n"))
    assert read_listing_file(job / NODES_DIR / "n2" / "tree.tsv.gz", under=job) is None
    assert read_listing_file(listing) == {"x.py": ("f", "ab")}  # control
