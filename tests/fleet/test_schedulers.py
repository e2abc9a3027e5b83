"""The scheduler registry (validators.fleet.schedulers): one class per scheduler behind one
Protocol, named by the spec and the CLI from one list; what differs between them (whose paths,
defaults on the nodes, pinning, the job folder's files) is asked of the class. Plans are made
for real (Slurm batch scripts, Kubernetes objects); nothing is submitted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest

from validators.fleet.schedulers import SCHEDULERS, Kubernetes, Slurm, scheduler_of
from validators.fleet.spec import SPEC_FILENAME, SchedulerName
from validators.fleet.submit import SubmitRequest, plan, spec_from_request

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "registry.example.com/stackgate/cu130@sha256:" + "ab" * 32


def test_one_list_of_names_for_the_spec_the_registry_and_the_cli() -> None:
    assert tuple(SCHEDULERS) == get_args(SchedulerName)
    done = subprocess.run([sys.executable, "-m", "validators", "fleet", "submit", "--help"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert "{" + ",".join(SCHEDULERS) + "}" in done.stdout


def _request(tmp_path: Path, scheduler: SchedulerName, **extra: object) -> SubmitRequest:
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir(exist_ok=True)
    return SubmitRequest(stack="cu130", wheelhouse="wheelhouse", nodes=["gpu[01-03]", "x"],
                         jobs_root="jobs", scheduler=scheduler, fleet_id="f1", image=IMAGE,
                         **extra)  # type: ignore[arg-type]  # fmt: skip


@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_a_request_becomes_the_schedulers_spec_and_plan(
    name: SchedulerName, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    spec = spec_from_request(_request(tmp_path, name))
    scheduler = scheduler_of(spec)
    assert spec.nodes == ["gpu01", "gpu02", "gpu03", "x"]
    if scheduler.local_paths:  # this machine's paths, made absolute for the nodes
        assert spec.wheelhouse == str(tmp_path / "wheelhouse")
        assert spec.job_dir == str(tmp_path / "jobs" / "f1")
    else:  # the pods' own paths, as given
        assert spec.wheelhouse == "wheelhouse" and spec.job_dir == "jobs/f1"
    assert spec.checkout == (scheduler.default_checkout() if not scheduler.local_paths
                             else str(Path(scheduler.default_checkout()).absolute()))  # fmt: skip
    assert spec.python == scheduler.default_python()
    planned = plan(spec, max_array=2)
    assert SPEC_FILENAME in planned.files and planned.commands
    assert scheduler.pins(spec) is True


def test_slurm_needs_the_wheelhouse_here_kubernetes_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    missing = SubmitRequest(stack="cu130", wheelhouse="nowhere", nodes=["a"], jobs_root="j",
                            scheduler="slurm")  # fmt: skip
    from stackgate.errors import BadInput

    with pytest.raises(BadInput, match="--wheelhouse nowhere: no such folder"):
        spec_from_request(missing)
    kube = SubmitRequest(stack="cu130", wheelhouse="nowhere", nodes=["a"], jobs_root="j",
                         scheduler="kubernetes", image=IMAGE)  # fmt: skip
    assert spec_from_request(kube).wheelhouse == "nowhere"


def test_pinning_is_the_schedulers_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    unpinned = spec_from_request(_request(tmp_path, "slurm", pin=False))
    assert isinstance(scheduler_of(unpinned), Slurm) and not scheduler_of(unpinned).pins(unpinned)
    assert Kubernetes().with_available_nodes(unpinned, dry_run=True) is unpinned
    # An unpinned Slurm fleet asks Slurm nothing about node states before submitting.
    assert Slurm().with_available_nodes(unpinned, dry_run=False) is unpinned


def test_element_job_ids_are_the_schedulers_answer() -> None:
    """A node's status must name the Slurm job `<array>_<task>` its element ran as; an Indexed
    Job's pods have no such id, so Kubernetes asks nothing (the pin check still holds)."""
    from validators.fleet.elements import Submission

    slurm_sub = Submission(scheduler="slurm", arrays=["40", "41"], offsets=[0, 100])
    assert Slurm().element_job(slurm_sub, 1) == "40_1"
    assert Slurm().element_job(slurm_sub, 101) == "41_1"
    assert Kubernetes().element_job(Submission(scheduler="kubernetes"), 1) is None


def test_node_names_come_from_each_schedulers_expander(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "no-slurm.conf"))  # no scontrol answer here
    (tmp_path / "no-slurm.conf").write_text("NotAKey=1\n")
    for scheduler in SCHEDULERS.values():
        assert scheduler.node_names(["gpu[01-02]-ib[1-2]", "x"]) == [
            "gpu01-ib1", "gpu01-ib2", "gpu02-ib1", "gpu02-ib2", "x",
        ]  # fmt: skip
