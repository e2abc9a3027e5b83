"""One "what is this argument?" rule (validators/records/reference.py), and each manifest,
record and file read once per gate (issue 28 §2): the gate's steps run in this process on a
real store, and the Lookup's counters say how often each thing was asked for and read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stackgate.errors import BadInput
from tests.gate.conftest import Project, fake_env_with_build_record
from tests.gate.test_cli import _write_runs
from validators.gate.flow import GateRequest, run_gate
from validators.records.reference import Lookup, parse_optional, parse_reference
from validators.records.store import RecordStore


@pytest.fixture
def here(project: Project, monkeypatch: pytest.MonkeyPatch) -> Project:
    """The project's folders for the in-process calls too; cwd a folder of its own."""
    for key in ("STACKGATE_ROOT", "STACKGATE_STACKS_DIR", "STACKGATE_STATE_DIR"):
        monkeypatch.setenv(key, project.env[key])
    cwd = project.root / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return project


def test_each_kind_of_argument_is_told_one_way(here: Project) -> None:
    cwd = Path.cwd()
    (cwd / "run.json").write_text("{}")
    (cwd / "cu128").write_text("{}")  # a file named like a stack: the stack wins
    (cwd / "a-folder").mkdir()
    (cwd / "x.json").mkdir()
    assert parse_reference("cu128").kind == "stack"
    assert parse_reference("elsewhere/nothing.toml").kind == "stack"  # load_stack says more
    assert parse_reference(str(here.stacks / "cu128.toml")).kind == "stack"
    assert parse_reference("run.json").kind == "file"
    assert parse_reference(str(cwd / "run.json")).kind == "file"
    assert parse_reference("0123abcd").kind == "record"
    assert parse_reference("a-stack-since-removed").kind == "record"
    assert parse_reference("missing/x.json").kind == "record"  # resolve_record: no such file
    assert parse_optional(None) is None
    for folder in ("a-folder", "x.json", str(cwd / "a-folder")):
        with pytest.raises(BadInput, match="is a folder; give a stack name"):
            parse_reference(folder)
    for empty in ("", "  "):
        with pytest.raises(BadInput, match="empty; give a stack name"):
            parse_reference(empty)


def _baseline(project: Project) -> tuple[list[Path], str]:
    """A known-good record of cu128 in the store and exported; a candidate's run files."""
    base = fake_env_with_build_record(project.root / "base", "cu128")
    runs = _write_runs(project, "base", "cu128", base, seed=11)
    done = project.run(
        "validators",
        "mark-good",
        "cu128",
        *runs,
        "--allow-host-mismatch",
        "--export",
        str(project.root / "exported"),
        "--json",
        check=True,
    )
    record_id = str(json.loads(done.stdout)["record_id"])
    cand = fake_env_with_build_record(project.root / "cand", "cu128")
    files = _write_runs(project, "cand", "cu128", cand, seed=12)
    return [Path(f) for f in files[1::2]], record_id


def _gate(request: GateRequest) -> Lookup:
    notes: list[str] = []
    with RecordStore.open(None, read_only=True) as store:
        lookup = Lookup(store)
        outcome = run_gate(request, lookup, notes.append)
    assert outcome.result.passed, outcome.result.reasons
    assert outcome.baseline.kind == "known-good" and outcome.remeasured is None
    return lookup


def test_a_gate_reads_each_manifest_record_and_file_once(here: Project) -> None:
    runs, record_id = _baseline(here)
    manifest = str((here.stacks / "cu128.toml").resolve())
    exported = next((here.root / "exported").rglob("*.json"))

    # CANDIDATE a stack with --run files: the manifest is asked for three times (the
    # baseline's stack, its [validation.gate], the candidate record) and read once.
    lookup = _gate(GateRequest(parse_reference("cu128"), runs=tuple(runs)))
    assert lookup.counts[f"stack {manifest}"] == 3 and lookup.loads[f"stack {manifest}"] == 1
    assert lookup.loads["record cu128"] == 1
    assert all(n == 1 for n in lookup.loads.values()), lookup.loads
    assert len([k for k in lookup.loads if k.startswith("file ")]) == len(runs)

    # CANDIDATE a run report file, the rest as --run: the file tells the baseline's stack,
    # then is the first run
    lookup = _gate(GateRequest(parse_reference(str(runs[0])), runs=tuple(runs[1:])))
    assert lookup.counts[f"file {runs[0]}"] == 2
    assert all(n == 1 for n in lookup.loads.values()), lookup.loads

    # CANDIDATE the record file, the baseline its id prefix: the same record, gated as itself
    lookup = _gate(GateRequest(parse_reference(str(exported)), parse_reference(record_id[:12])))
    assert lookup.counts[f"record {record_id[:12]}"] == 2  # its stack, then the baseline
    assert all(n == 1 for n in lookup.loads.values()), lookup.loads


def test_a_record_given_as_a_run_is_refused_by_name(here: Project) -> None:
    runs, _ = _baseline(here)
    exported = next((here.root / "exported").rglob("*.json"))
    with pytest.raises(BadInput, match="a record, not a run report"):
        _gate(GateRequest(parse_reference("cu128"), runs=(*runs, exported)))


def test_diff_and_report_read_each_side_once_and_name_the_wrong_kind(here: Project) -> None:
    runs, record_id = _baseline(here)
    exported = next((here.root / "exported").rglob("*.json"))
    from validators.commands.diff import _side

    with RecordStore.open(None, read_only=True) as store:
        lookup = Lookup(store)
        # the same stack twice, the same record by file and by id prefix twice
        for text in ("cu128", "cu128", str(exported), record_id[:12], record_id[:12]):
            _side(parse_reference(text), lookup)
        assert all(n == 1 for n in lookup.loads.values()), lookup.loads
        assert lookup.counts[f"record {record_id[:12]}"] == 2
        with pytest.raises(BadInput, match="a run report, not a record"):
            _side(parse_reference(str(runs[0])), lookup)

    for argv, said in (
        (["diff", "cu128", str(here.root)], "is a folder; give a stack name"),
        (["diff", str(runs[0]), "cu128"], "a run report, not a record"),
        (["mark-good", str(runs[0]), "--run", str(runs[0])], "not a stack"),
        (["report", str(here.root), "--out", str(here.root / "r.html")], "is a folder"),
        (["gate", "cu128", "--run", str(exported)], "a record, not a run report"),
    ):
        done = here.run("validators", *argv)
        assert done.returncode == 2, (argv, done.stderr)
        assert said in done.stderr and "Traceback" not in done.stderr, (argv, done.stderr)
    # a record file and a record id prefix as report's candidate and baseline
    html = here.root / "pair.html"
    done = here.run(
        "validators", "report", str(exported), "--baseline", record_id[:12], "--out", str(html)
    )
    assert done.returncode == 0 and html.is_file(), done.stderr
