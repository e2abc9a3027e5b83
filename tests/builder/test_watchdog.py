"""The watchdog on real processes under a real make: it pauses the newest job near the limit,
resumes it, lets the build finish, and measures peak RSS per job."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.compile.watched import run_watched
from tests.helpers.memjobs import build_hog, have_tools, write_makefile

MiB = 1024 * 1024


@pytest.fixture
def src(tmp_path: Path) -> tuple[Path, Path]:
    reason = have_tools()
    if reason:
        pytest.skip(reason)
    return tmp_path, build_hog(tmp_path)


def test_watchdog_pauses_and_resumes_jobs_and_measures_them(src: tuple[Path, Path]) -> None:
    folder, hog = src
    write_makefile(folder, hog, targets=3, peak_mb=150, hold_ms=1000)  # peaks overlap
    result = run_watched(
        ["make", "-C", folder, "-j3"], env={"PATH": "/usr/bin:/bin"}, cwd=folder,
        limit_bytes=300 * MiB, log_path=folder / "log",
    )
    assert result.returncode == 0
    watch = result.watch
    assert watch.pauses >= 1 and watch.resumes >= watch.pauses
    assert watch.jobs_seen >= 3  # the hogs, plus any `touch` a sample caught
    assert 140 * MiB <= watch.peak_job_rss <= 200 * MiB
    assert len(list(folder.glob("obj*.o"))) == 3


def test_measure_only_mode_never_pauses(src: tuple[Path, Path]) -> None:
    folder, hog = src
    write_makefile(folder, hog, targets=2, peak_mb=100, steps=5, hold_ms=1000)
    result = run_watched(
        ["make", "-C", folder, "-j2"], env={"PATH": "/usr/bin:/bin"}, cwd=folder,
        limit_bytes=50 * MiB, log_path=folder / "log", pause=False,
    )
    assert result.returncode == 0 and result.watch.pauses == 0
    assert result.watch.max_concurrent_jobs == 2


def test_a_failing_step_reports_its_exit_code(tmp_path: Path) -> None:
    result = run_watched(["sh", "-c", "echo boom; exit 7"], env={"PATH": "/usr/bin:/bin"},
                         cwd=tmp_path, limit_bytes=GIB_ONE, log_path=tmp_path / "log")
    assert result.returncode == 7 and result.tail == ["boom"]
    assert "# exit 7" in (tmp_path / "log").read_text()


GIB_ONE = 1024 * MiB
