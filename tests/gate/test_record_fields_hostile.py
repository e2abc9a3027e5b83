"""Record and fleet fields attacked the way an outsider would (issue 10 red team).

Names checked with a regex ending in `$` accepted one trailing newline (`$` matches before a
final "\n"): a record whose stack is "smoke\n" was imported and exported into a folder whose
name ends in a newline, a fleet Slurm option "gpu\n" reached the job script. Every such check
must match the whole string. Also: created_at must be UTC, and no number in a record may be
NaN or infinite, however deep it sits."""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from pydantic import ValidationError

from stackgate.errors import BadInput
from tests.gate.record_factory import make_record
from validators.fleet.slurm.options import SlurmOptions
from validators.fleet.spec import FleetSpec
from validators.records.model import content_sha256, load_record

ROOT = Path(__file__).resolve().parents[2]


def _resealed(data: dict[str, object]) -> dict[str, object]:
    data = {k: v for k, v in data.items() if k != "record_id"}
    data["record_id"] = content_sha256(data)
    return data


@pytest.mark.parametrize("stack", ["smoke\n", "smoke\r", "smoke\x00", "a" * 101])
def test_a_record_stack_with_a_trailing_control_char_is_refused(stack: str) -> None:
    data = make_record().model_dump(mode="json")
    data["stack"] = stack
    with pytest.raises(BadInput) as caught:
        load_record(_resealed(data), where="records/x.json")
    assert any(d.startswith("stack:") for d in caught.value.details), caught.value.details


def test_records_import_of_a_newline_stack_writes_nothing(tmp_path: Path) -> None:
    data = make_record().model_dump(mode="json")
    data["stack"] = "smoke\n"
    source = tmp_path / "in"
    source.mkdir()
    (source / "r.json").write_text(json.dumps(_resealed(data)))
    store = tmp_path / "s.sqlite"
    done = subprocess.run(
        [sys.executable, "-m", "validators", "records", "import", "--dir", str(source),
         "--store", str(store)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "stack" in done.stderr
    if store.exists():  # created empty at most: no record in it
        import sqlite3

        with closing(sqlite3.connect(store)) as db, db:
            assert db.execute("SELECT COUNT(*) FROM records").fetchone()[0] == 0


def test_fleet_names_with_a_trailing_newline_are_refused() -> None:
    with pytest.raises(ValidationError):
        SlurmOptions(partition="gpu\n")
    spec = {"fleet_id": "f1", "stack": "smoke", "stack_name": "smoke", "wheelhouse": "/w",
            "job_dir": "/j", "checkout": "/c", "python": "/p", "local_root": "/l"}  # fmt: skip
    FleetSpec.model_validate({**spec, "nodes": ["node1"]})
    with pytest.raises(ValidationError):
        FleetSpec.model_validate({**spec, "nodes": ["node1\n"]})


@pytest.mark.parametrize(
    "created_at",
    ["9999-12-31T23:00:00-05:00", "0001-01-01T00:00:00+05:00", "2026-01-01T10:00:00-12:00"],
    ids=["past-year-9999-in-utc", "before-year-1-in-utc", "local-offset"],
)
def test_created_at_must_be_utc(created_at: str) -> None:
    """The store orders records by created_at as text and export names them by its UTC stamp:
    an offset other than UTC mis-orders the newest known-good and can overflow the stamp
    (year 9999 at -05:00 was a traceback at `records export`)."""
    data = make_record().model_dump(mode="json")
    data["created_at"] = created_at
    with pytest.raises(BadInput) as caught:
        load_record(_resealed(data), where="records/x.json")
    assert any(d.startswith("created_at:") for d in caught.value.details), caught.value.details


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("host", "ram_gib"), float("nan")),
        (("host", "gpu", "memory_gib"), float("inf")),
        (("host", "swap_gib"), float("-inf")),
    ],
    ids=["ram-nan", "gpu-memory-inf", "swap-minus-inf"],
)
def test_a_non_finite_number_anywhere_in_a_record_is_refused(
    path: tuple[str, ...], value: float
) -> None:
    """NaN hidden in a nested host fact compares unequal with everything (host drift checks
    compare with ==); a record carries finite numbers only."""
    data = make_record().model_dump(mode="json")
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(BadInput) as caught:
        load_record(_resealed(data), where="records/x.json")
    assert any(d.startswith(".".join(path)) for d in caught.value.details), caught.value.details
