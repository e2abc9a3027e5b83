"""`submission.json` is written from its model (validators.fleet.elements.Submission): the same
bytes the scheduler's record dict used to give, fields in the model's order, only those set,
and read back through the same model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from validators.fleet.elements import SUBMISSION_FILENAME, Submission, read_submission

SLURM: dict[str, Any] = {
    "scheduler": "slurm",
    "arrays": ["101", "102"],
    "offsets": [0, 3],
    "max_array_size": 3,
    "pinned_with": None,
    "collector_job": "103",
    "commands": [["sbatch", "--parsable", "a.sh"], ["scontrol", "release", "101"]],
}
KUBERNETES: dict[str, Any] = {
    "scheduler": "kubernetes",
    "commands": [["kubectl", "apply", "-f", "m.json"]],
}


def test_the_file_is_the_record_s_json_and_reads_back(tmp_path: Path) -> None:
    for record in (SLURM, KUBERNETES):
        model = Submission.model_validate(record)
        text = model.to_json()
        assert text == json.dumps(record, indent=2) + "\n"
        (tmp_path / SUBMISSION_FILENAME).write_text(text, encoding="utf-8")
        assert read_submission(tmp_path) == model


def test_a_copy_with_the_release_command_keeps_every_field_set() -> None:
    held = Submission.model_validate(SLURM)
    release = ["scontrol", "release", "102"]
    done = held.model_copy(update={"commands": [*held.commands, release]})
    assert json.loads(done.to_json()) == {**SLURM, "commands": [*SLURM["commands"], release]}
