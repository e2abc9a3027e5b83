"""What time means for records (issue 23 section 5; validators/records/clock.py).

Real clocks, wrong: each command runs under libfaketime (`faketime`, a real LD_PRELOAD shim
over clock_gettime), so the host's own clock is the one that is off, as on the machines that
broke the store: a record made 3 days fast made every later command on a correct clock call
the store "tampered" (list, verify, gate exit 1), and a record made a year slow was never
the baseline, silently.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.gate.conftest import ROOT, Project, fake_env_with_build_record
from tests.gate.test_run_set import _runs

FAKETIME = shutil.which("faketime")
pytestmark = pytest.mark.skipif(
    FAKETIME is None, reason="faketime missing (.ci/bootstrap installs it)"
)


def _at(project: Project, spec: str | None, *argv: str) -> subprocess.CompletedProcess[str]:
    """`python -m ARGV` with this host's clock set by faketime's spec (None: the real clock)."""
    prefix = [str(FAKETIME), "-f", spec] if spec else []
    env = project.env  # monotonic faked too: sleeps (clock_nanosleep) stay consistent
    return subprocess.run(
        [*prefix, sys.executable, "-m", *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _mark_good(
    project: Project, spec: str | None, env: Path, name: str, **update: Any
) -> subprocess.CompletedProcess[str]:
    runs = _runs(project, name, env, **update)
    return _at(
        project, spec, "validators", "mark-good", "cu128", *runs, "--allow-host-mismatch", "--json"
    )


def _latest(project: Project) -> str:
    shown = _at(project, None, "validators", "records", "show", "cu128", "--json")
    assert shown.returncode == 0, shown.stderr
    return str(json.loads(shown.stdout)["record_id"])


def test_a_record_made_3_days_fast_leaves_the_store_readable(project: Project) -> None:
    env = fake_env_with_build_record(project.root / "a", "cu128")
    fast = _mark_good(project, "+3d", env, "fast")
    assert fast.returncode == 0, fast.stderr
    fast_id = json.loads(fast.stdout)["record_id"]
    # Back on a correct clock: every reader works (before: "tampered store", exit 1).
    listed = _at(project, None, "validators", "records", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [r["record_id"] for r in json.loads(listed.stdout)] == [fast_id]
    verified = _at(project, None, "validators", "records", "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "ahead of this host's clock" in verified.stderr  # said, not a tampered store
    assert _latest(project) == fast_id
    # The next record, made on the correct clock, is newer by the chain, with a warning.
    ok = _mark_good(project, None, env, "ok")
    assert ok.returncode == 0, ok.stderr
    assert "before the newest record in the store" in ok.stderr
    assert _latest(project) == json.loads(ok.stdout)["record_id"] != fast_id


def test_a_record_made_a_year_slow_is_the_baseline_and_says_why(project: Project) -> None:
    env = fake_env_with_build_record(project.root / "a", "cu128")
    first = _mark_good(project, None, env, "first")
    assert first.returncode == 0, first.stderr
    year_ago = (datetime.now(UTC) - timedelta(days=365)).isoformat(timespec="seconds")
    slow = _mark_good(project, "-365d", env, "slow", started_at=year_ago)
    assert slow.returncode == 0, slow.stderr
    assert "before the newest record in the store" in slow.stderr
    slow_id = json.loads(slow.stdout)["record_id"]
    assert json.loads(slow.stdout)["record_id"] != json.loads(first.stdout)["record_id"]
    # The gate's default baseline is the newest by the chain: the slow one (before: the first
    # record stayed the baseline, silently, for a year).
    assert _latest(project) == slow_id


@pytest.mark.parametrize(
    ("spec", "said"),
    [("@1970-01-02 00:00:00", "before 2024"), ("-3d", "the clock jumped back")],
    ids=["epoch", "behind-its-own-runs"],
)
def test_a_plainly_wrong_clock_is_a_clear_recoverable_error(
    project: Project, spec: str, said: str
) -> None:
    env = fake_env_with_build_record(project.root / "a", "cu128")
    recent = datetime.now(UTC).isoformat(timespec="seconds")
    done = _mark_good(project, spec, env, "bad", started_at=recent)
    assert done.returncode == 3, done.stdout + done.stderr
    assert said in done.stderr and "nothing was written" in done.stderr
    assert "Traceback" not in done.stderr
    listed = _at(project, None, "validators", "records", "list", "--json")
    assert json.loads(listed.stdout) == []
    # Recoverable: the same runs on a correct clock are recorded.
    again = _mark_good(project, None, env, "bad", started_at=recent)
    assert again.returncode == 0, again.stderr


def test_one_record_from_a_fast_clock_warns_loudly_and_never_blocks_the_others(
    project: Project, tmp_path: Path
) -> None:
    """mark-good --export on a host 3 days fast says so loudly (its record is 3 days after
    the newest one it can see); back on correct clocks, `records import --dir` of that folder
    imports every other record and skips that one, naming it (before: exit 2 for all, until
    the file was removed from git)."""
    env = fake_env_with_build_record(project.root / "a", "cu128")
    shared = tmp_path / "shared-records"
    ok_runs = _runs(project, "ok", env)
    first = _at(project, None, "validators", "mark-good", "cu128", *ok_runs,
                "--allow-host-mismatch", "--json", "--export", str(shared))  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert "WARNING" not in first.stderr  # control: a correct clock says nothing
    fast_runs = _runs(project, "fast", env)
    fast = _at(project, "+3d", "validators", "mark-good", "cu128", *fast_runs,
               "--allow-host-mismatch", "--json", "--export", str(shared))  # fmt: skip
    assert fast.returncode == 0, fast.stderr
    assert "WARNING: this record is dated" in fast.stderr, fast.stderr
    assert "3.0 days after the newest record this host can see" in fast.stderr, fast.stderr
    fast_id = json.loads(fast.stdout)["record_id"]
    other = {**project.env, "STACKGATE_STATE_DIR": str(tmp_path / "other-state")}
    done = subprocess.run(
        [sys.executable, "-m", "validators", "records", "import", "--dir", str(shared), "--json"],
        cwd=ROOT, env=other, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["added"] == [json.loads(first.stdout)["record_id"]], out
    assert len(out["skipped"]) == 1 and fast_id[:12] in out["skipped"][0], out
    assert "warning: skipped" in done.stderr and "ahead of this host's clock" in done.stderr
