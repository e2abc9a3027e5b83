"""`nox -s tests` before and after the suite (issue 29 item 2): it checks free disk before
anything is installed, naming each filesystem short of its share, and when the parallel phase
fails it says that the `alone` phase did not run."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from tests.foundation.test_noxfile_phases import noxfile  # noqa: F401 (fixture)
from tests.helpers.small_disk import small_tmpfs

ROOT = Path(__file__).resolve().parents[2]


def test_a_small_disk_is_named_before_the_suite_starts(noxfile: ModuleType, tmp_path: Path) -> None:  # noqa: F811
    with small_tmpfs(tmp_path, size_mb=16) as small:
        places = {"cache": small / "cache", "tmp": small / "tmp", "checkout": ROOT}
        needed, short = noxfile.disk_shortfalls([], places)
        assert needed == 21.0
        assert len(short) == 1 and short[0].startswith("0.0 GB free on the filesystem of ")
        assert f"cache {small}" in short[0] and f"tmp {small}" in short[0]
        assert short[0].endswith("needs ~20.0 GB")  # the cache's 16 GB and tmp's 4 GB
        # the fast subset needs less; what is already cached is not written again
        _, short = noxfile.disk_shortfalls(["-m", "not slow"], places)
        assert short[0].endswith("needs ~2.0 GB")
        _, short = noxfile.disk_shortfalls([], places, cached_gb=15.0)
        assert short[0].endswith("needs ~5.0 GB")
        _, short = noxfile.disk_shortfalls([], places, free_gb=lambda _: 100.0)
        assert short == []


def _nox() -> str:
    found = ROOT / ".tools" / "bin" / "nox"
    if found.is_file():
        return str(found)
    on_path = shutil.which("nox")
    assert on_path or os.environ.get("CI") != "true", "CI runs .ci/bootstrap first"
    if on_path is None:
        pytest.skip("no .tools/bin/nox and no nox on PATH (run .ci/bootstrap tools)")
    return on_path


@pytest.mark.slow
def test_a_failed_parallel_phase_says_the_alone_phase_did_not_run(tmp_path: Path) -> None:
    failing = tmp_path / "test_fails.py"
    failing.write_text("def test_fails():\n    assert False\n")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTEST_ADDOPTS")}
    done = subprocess.run(
        [_nox(), "--envdir", str(tmp_path / "nox"), "-s", "tests", "--", str(failing), "-p", "tests.conftest", "-p",
         "no:randomly", "-n", "0"],
        cwd=ROOT, capture_output=True, text=True, timeout=900, check=False, env=env,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode != 0, out[-3000:]
    assert "disk: enough free for the suite" in out or "not enough free disk" in out
    assert "1 failed" in out, out[-3000:]
    assert "the `alone` phase (tests comparing measured rates, one at a time) did NOT run" in out
