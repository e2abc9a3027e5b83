"""JSON the tool did not write is read strictly: a duplicate key (json keeps the last one, a
reviewer of the committed file reads the first) and an integer too long to convert (CPython
raises a bare ValueError) are bad input naming the file, exit 2, never a pass or a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from stackgate.errors import BadInput
from stackgate.files import parse_json_text
from tests.gate.record_factory import make_record

ROOT = Path(__file__).resolve().parents[2]


def _validators(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "validators", *argv, "--store", str(tmp_path / "s.sqlite")],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _duplicate_runs(text: str) -> str:
    """The sealed record with `"runs": 1` written before its real `"runs": 8`: the id still
    matches (json keeps the last), a reader of the file sees 1 run."""
    assert text.count('"runs": 8') == 1
    return text.replace('"runs": 8', '"runs": 1, "runs": 8')


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"a": 1, "a": 2}', "duplicate key(s) 'a'"),
        ('{"m": {"x": [1], "y": 2, "x": [3]}}', "duplicate key(s) 'x'"),
        ('[{"k": 1, "k": 1}]', "duplicate key(s) 'k'"),  # equal values too: still two keys
        ('{"runs": ' + "9" * 5000 + "}", "4300 digits"),
    ],
)
def test_parse_json_text_refuses_duplicate_keys_and_endless_integers(text: str, says: str) -> None:
    with pytest.raises(BadInput) as caught:
        parse_json_text(text, where="records/x.json")
    assert caught.value.message.startswith("records/x.json: ")
    assert says in caught.value.message


def test_a_record_with_a_duplicate_key_is_refused_at_the_gate(tmp_path: Path) -> None:
    """Before: PASSED, exit 0 (the file said runs 1 to its reader, the gate used 8)."""
    cand = tmp_path / "cand.json"
    cand.write_text(_duplicate_runs(make_record(kind="candidate", minute=5).to_json()))
    base = tmp_path / "base.json"
    base.write_text(make_record().to_json())
    done = _validators(tmp_path, "gate", str(cand), "--baseline", str(base))
    assert done.returncode == 2, done.stderr
    assert "cand.json" in done.stderr and "duplicate key(s) 'runs'" in done.stderr
    assert "PASSED" not in done.stderr


def test_records_import_of_a_duplicate_key_file_imports_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "records" / "smoke"
    folder.mkdir(parents=True)
    good = make_record(minute=1)
    (folder / "good.json").write_text(good.to_json())
    (folder / "dup.json").write_text(_duplicate_runs(make_record(minute=2).to_json()))
    done = _validators(tmp_path, "records", "import", str(tmp_path / "records"))
    assert done.returncode == 2, done.stderr
    assert "dup.json" in done.stderr and "duplicate key" in done.stderr
    listed = _validators(tmp_path, "records", "list", "--json")
    assert good.record_id not in listed.stdout


def test_an_endless_integer_in_a_run_report_is_exit_2_not_a_traceback(tmp_path: Path) -> None:
    report = {"stack": "smoke", "started_at": "2026-01-01T00:00:00+00:00", "results": []}
    text = json.dumps(report).replace('"results": []', '"results": [], "duration_s": ' + "7" * 4400)
    path = tmp_path / "run.json"
    path.write_text(text)
    base = tmp_path / "base.json"
    base.write_text(make_record().to_json())
    done = _validators(tmp_path, "gate", str(path), "--baseline", str(base))
    assert done.returncode == 2, done.stderr
    assert "run.json" in done.stderr and "Traceback" not in done.stderr
