"""Files the tool writes and later runs trust are written whole (temp file + rename), so a run
cut short never leaves a torn file, and an output path that is a symlink (planted in a shared
job folder or a checkout) is replaced, never written through to whatever it points at.
Variants: the fleet verdict, the wheelhouse index, a correctness reference."""

from __future__ import annotations

import json
from pathlib import Path

from validators.fleet.verdict import VERDICT_FILENAME, FleetVerdict, write_verdict
from validators.serve.correctness import ARITHMETIC, Sample
from validators.serve.correctness import record as record_reference


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    return victim


def test_the_fleet_verdict_replaces_a_symlink(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    job = tmp_path / "job"
    job.mkdir()
    (job / VERDICT_FILENAME).symlink_to(victim)
    verdict = FleetVerdict(fleet_id="f", stack="smoke", expected_nodes=0, counts={}, nodes=[],
                           classes=[])  # fmt: skip
    path = write_verdict(job, verdict)
    assert victim.read_text() == "precious\n"
    assert not path.is_symlink()
    assert json.loads(path.read_text())["fleet_id"] == "f"


def test_a_correctness_reference_replaces_a_symlink(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    target = tmp_path / "refs" / "ref.json"
    target.parent.mkdir()
    target.symlink_to(victim)
    arithmetic = [Sample(prompt=p, text=answer) for p, answer in ARITHMETIC]
    record_reference(
        target, stack="smoke", profile="p", model="m", greedy=[], arithmetic=arithmetic
    )
    assert victim.read_text() == "precious\n"
    assert not target.is_symlink()
