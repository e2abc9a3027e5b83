"""`--nodes` expansion: python-hostlist everywhere, Slurm's `scontrol show hostnames` where the
scheduler is Slurm and scontrol has a configuration. The comparison runs the real scontrol
(slurm-client) on a minimal slurm.conf: `show hostnames` reads the configuration and contacts
no daemon."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from stackgate.errors import BadInput
from validators.fleet.slurm import hostlist

# (pattern, names): Slurm and python-hostlist give these alike.
AGREED = [
    ("gpu[01-03,07]", ["gpu01", "gpu02", "gpu03", "gpu07"]),
    ("a,b", ["a", "b"]),
    ("n[1-3],m[01-02]", ["n1", "n2", "n3", "m01", "m02"]),
    ("n[08-11]", ["n08", "n09", "n10", "n11"]),
    ("n[9-10]", ["n9", "n10"]),
    ("gpu[01-02]-ib[1-2]", ["gpu01-ib1", "gpu01-ib2", "gpu02-ib1", "gpu02-ib2"]),  # ours refused it
    ("n[1-2]x[3-4]", ["n1x3", "n1x4", "n2x3", "n2x4"]),
    ("gpu[01-03]a[1]", ["gpu01a1", "gpu02a1", "gpu03a1"]),
    ("a[1-2],,b", ["a1", "a2", "b"]),
    ("rack1-gpu[7]", ["rack1-gpu7"]),
    ("g[1-2],g[2]", ["g1", "g2", "g2"]),  # kept: the spec refuses a node listed twice
]
# Malformed for both: refused before Slurm is asked, naming the flag and the item.
MALFORMED = ["gpu[3-1]", "gpu[1-3", "a[]", "gpu1-3]", "n[1-x]"]


@pytest.mark.parametrize(("pattern", "names"), AGREED)
def test_library_expands_in_order(pattern: str, names: list[str]) -> None:
    assert hostlist.expand([pattern], ask_slurm=False) == names


@pytest.mark.parametrize("pattern", MALFORMED)
def test_malformed_refused_naming_the_flag(pattern: str) -> None:
    with pytest.raises(BadInput, match=r"^--nodes '.*': not a hostlist"):
        hostlist.expand(["ok1", pattern], ask_slurm=False)


def test_items_concatenate_and_space_is_kept_for_the_spec_to_refuse() -> None:
    assert hostlist.expand(["g[1-2]", "a,b"], ask_slurm=False) == ["g1", "g2", "a", "b"]
    assert hostlist.expand(["a,b c"], ask_slurm=True) == ["a", "b c"]  # FleetSpec refuses "b c"


def _conf(tmp_path: Path, text: str) -> str:
    conf = tmp_path / "slurm.conf"
    conf.write_text(text)
    return str(conf)


@pytest.mark.slurm
def test_slurm_and_library_agree_except_a_suffix_after_a_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scontrol = shutil.which("scontrol")
    assert scontrol is not None
    conf = "ClusterName=t\nSlurmctldHost=localhost\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n"
    monkeypatch.setenv("SLURM_CONF", _conf(tmp_path, conf))
    for pattern, names in AGREED:
        if "[" in pattern:  # Slurm is asked only about ranges; ask it directly too
            assert hostlist._by_slurm(scontrol, pattern) == names, pattern
        assert hostlist.expand([pattern], ask_slurm=True) == names, pattern
    for pattern in MALFORMED:
        with pytest.raises(BadInput, match="not a hostlist"):
            hostlist.expand([pattern], ask_slurm=True)
    # The disagreement: Slurm refuses a suffix after a range, python-hostlist expands it.
    assert hostlist.expand(["x[001-003]y"], ask_slurm=False) == ["x001y", "x002y", "x003y"]
    with pytest.raises(BadInput, match=r"^--nodes 'x\[001-003\]y': Slurm refuses this hostlist"):
        hostlist.expand(["x[001-003]y"], ask_slurm=True)


@pytest.mark.slurm
def test_scontrol_without_a_configuration_leaves_the_library_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dry run on a machine whose scontrol has no usable configuration (it exits 1)."""
    monkeypatch.setenv("SLURM_CONF", _conf(tmp_path, "ClusterName=t\nNotAKey=1\n"))
    assert hostlist.expand(["x[001-003]y"], ask_slurm=True) == ["x001y", "x002y", "x003y"]
