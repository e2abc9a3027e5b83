"""Under CI=true a skip for a missing tool fails; the listed ones (no GPU, ...) stay skips."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TESTS = """
import pytest

def test_missing_tool():
    pytest.skip("podman or runc not installed (apt-get install podman runc)")

def test_no_gpu():
    pytest.skip("no NVIDIA GPU on this machine")

@pytest.mark.xfail(reason="a known failure is not a skip")
def test_xfail():
    raise AssertionError
"""


def _run(tmp_path: Path, ci: bool) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_sample.py").write_text(TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = str(ROOT)
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-q", "-p", "no:cacheprovider",
         "-p", "no:xdist", "-c", str(tmp_path / "pytest.ini"), str(tmp_path / "test_sample.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )


def test_under_ci_a_skip_for_a_missing_tool_fails(tmp_path: Path) -> None:
    done = _run(tmp_path, ci=True)
    assert done.returncode == 1, done.stdout
    assert "1 failed, 1 skipped, 1 xfailed" in done.stdout
    assert "skipped under CI=true: podman or runc not installed" in done.stdout
    assert "allowed skips (tests/allowed_skips.py)" in done.stdout


def test_outside_ci_both_skip_and_the_summary_names_the_unallowed_one(tmp_path: Path) -> None:
    done = _run(tmp_path, ci=False)
    assert done.returncode == 0, done.stdout
    assert "2 skipped, 1 xfailed" in done.stdout
    assert "not allowed under CI (fail there):" in done.stdout
    assert "test_missing_tool" in done.stdout
