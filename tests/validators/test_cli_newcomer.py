"""The validators as a newcomer meets them, through the real CLI, piped as in a CI log: tables
with whole rows, failures first and a verdict line; disk only where it is needed; empty
stores and missing records that say what to do next."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.small_disk import small_tmpfs
from validators.records.store import RecordStore

ROOT = Path(__file__).resolve().parents[2]
ORDER = {"FAIL": 0, "ERROR": 1, "SKIP": 2, "PASS": 3}


def _validators(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "validators", *[str(a) for a in args]],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def _table_statuses(stderr: str) -> list[str]:
    """Piped, the results table has no borders: each row starts with its status."""
    firsts = [line.split()[0] for line in stderr.splitlines() if line.strip()]
    return [word for word in firsts if word in ORDER]


def test_preflight_piped_rows_are_whole_failures_first_and_a_verdict_ends_it() -> None:
    as_json = _validators("preflight", "cu130", "--json")
    payload = json.loads(as_json.stdout)
    results = payload["results"]
    human = _validators("preflight", "cu130")
    assert human.returncode == as_json.returncode
    lines = [re.sub(r"\d", "#", line) for line in human.stderr.splitlines()]
    for r in results:  # every reason on one line, never broken mid-token (live numbers aside)
        reason = re.sub(r"\d", "#", r["reason"])
        check = re.sub(r"\d", "#", r["check"])
        assert any(reason in line and check in line for line in lines), r
    statuses = _table_statuses(human.stderr)
    # and no row is padded to the longest one (piped tables were 2,400 characters wide): a
    # row ends where its reason does
    for line in human.stderr.splitlines():
        assert not line.endswith(" "), line
    longest_check = max(len(r["check"]) for r in results)
    for r in results:
        row = next(line for line in human.stderr.splitlines() if f" {r['check']} " in line)
        assert len(row) <= len(r["reason"]) + longest_check + 20, row
    assert statuses == sorted(statuses, key=ORDER.__getitem__) and len(statuses) == len(results)
    last = human.stderr.strip().splitlines()[-1]
    failed = any(r["status"] in ("FAIL", "ERROR") for r in results)
    # Without a driver or GPU (this machine, CI) nothing decides whether the host can run
    # cu130: INCOMPLETE saying what it needs and exit 3, never "OK ... 4 skipped", exit 0.
    no_gpu = any(r["check"] == "host.gpus" and r["status"] == "SKIP" for r in results)
    verdict = "FAILED" if failed else "INCOMPLETE" if no_gpu else "OK"
    assert as_json.returncode == {"FAILED": 1, "INCOMPLETE": 3, "OK": 0}[verdict]
    assert last.startswith(f"{verdict} preflight cu130: {len(results)} checks, ")
    if no_gpu and not failed:
        assert "no NVIDIA driver or GPU here" in payload["incomplete"]
        assert last.endswith("serving profile kimi-k25-tp8 needs 8 GPU(s))")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 16 MiB filesystem (tmpfs): far below host.disk's 10 GiB."""
    with small_tmpfs(tmp_path, size_mb=16) as mount_point:
        yield mount_point


def _disk(result: subprocess.CompletedProcess[str]) -> dict[str, object]:
    payload = json.loads(result.stdout)
    return next(r for r in payload["results"] if r["check"] == "host.disk")


def test_disk_threshold_only_where_an_env_will_be_built(small_disk: Path) -> None:
    # Nothing built on the small disk yet: building needs the space, so it fails.
    before = _disk(_validators("preflight", "cu130", "--json", cwd=small_disk))
    assert before["status"] == "FAIL" and "needed to build an env" in str(before["reason"])
    # An env already built there: checking it writes nothing big, so it does not fail.
    env = small_disk / "env"
    venv.create(env, with_pip=False, symlinks=True)
    after = _disk(_validators("preflight", "cu130", "--env", env, "--json"))
    assert after["status"] == "PASS", after
    assert "not needed, the env is already built" in str(after["reason"])
    # ... and static on it is not blocked by the disk either.
    static = _validators("static", "cu128", "--env", env, "--json")
    assert all(r["check"] != "host.disk" for r in json.loads(static.stdout)["results"])


def test_static_ends_with_a_summary_and_does_not_repeat_the_group_time(tmp_path: Path) -> None:
    env = tmp_path / "env"
    venv.create(env, with_pip=False, symlinks=True)
    done = _validators("static", "cu128", "--env", env)
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(("FAILED static checks: ", "OK static checks: ")), done.stderr
    assert " checks, " in last and " passed, " in last and last.endswith(" s")
    payload = json.loads(_validators("static", "cu128", "--env", env, "--json").stdout)
    per_package = [
        r
        for r in payload["results"]
        if r["check"].split(".")[:2] == ["static", "abi"] and r["check"] != "static.abi.summary"
    ]
    assert all(r["duration_s"] == 0.0 for r in per_package)


def test_an_empty_store_says_how_to_fill_it(tmp_path: Path) -> None:
    store = tmp_path / "records.sqlite"
    with RecordStore.open(store):
        pass  # made, holds no record
    done = _validators("records", "list", "--store", store)
    assert done.returncode == 0
    assert "no records in" in done.stderr and "mark-good STACK" in done.stderr
    assert "records import" in done.stderr


@pytest.mark.parametrize("action", ["list", "show", "export"])
def test_a_store_that_is_not_there_is_exit_2_not_an_empty_one(tmp_path: Path, action: str) -> None:
    """A mistyped --store read as "no records" with exit 0; nothing is created there."""
    store = tmp_path / "typo.sqlite"
    extra = (
        ["cu130"] if action == "show" else ["--dir", str(tmp_path / "out")] * (action == "export")
    )
    done = _validators("records", action, *extra, "--store", store)
    assert done.returncode == 2, done.stderr
    assert f"records {action} --store {store}: no such file" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not store.exists() and not (tmp_path / "out").exists()


def test_report_without_records_mentions_reporting_a_run_file(tmp_path: Path) -> None:
    done = _validators(
        "report", "cu130", "--out", tmp_path / "r.html", "--store", tmp_path / "s.sqlite"
    )
    assert done.returncode == 2
    assert "no known-good record" in done.stderr
    assert "stackgate report RESULT.json --out" in done.stderr
    assert not (tmp_path / "r.html").exists()


def test_gate_without_runs_says_the_baseline_is_missing_too(tmp_path: Path) -> None:
    done = _validators(
        "gate",
        "cu130-torch210",
        "--baseline",
        "cu130",
        "--env",
        tmp_path / "missing",
        "--store",
        tmp_path / "s.sqlite",
        "--json",
    )
    assert done.returncode == 2, done.stderr
    payload = json.loads(done.stdout)
    assert "no runs for candidate cu130-torch210" in payload["error"]
    assert "the baseline is missing too" in payload["error"]
    assert any("mark-good cu130" in d for d in payload["details"])


def test_show_prints_the_manifest_on_stdout() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "builder", "show", "cu130"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0
    assert json.loads(done.stdout)["name"] == "cu130"
    assert done.stderr.strip() == "OK cu130: resolved manifest printed on stdout"


def test_every_per_stack_nox_session_has_a_description() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "nox", "-l"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    sessions = [line[2:] for line in done.stdout.splitlines() if line.startswith(("* ", "- "))]
    per_stack = [s for s in sessions if s.split(" ")[0].startswith(("check-", "gate-", "build-"))]
    assert per_stack and all(" -> " in s for s in per_stack), per_stack
    gate = next(s for s in sessions if s.startswith("gate-cu130 "))
    assert "gate cu130 as the CANDIDATE" in gate
    assert any(s.startswith("fresh-machine -> ") for s in sessions)
