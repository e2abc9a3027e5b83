"""The no-swap proof with real processes in a real memory cgroup (limit set, swap 0): a naive
`make -j` is OOM-killed; the planned build finishes; a plan from a bad estimate survives
because the watchdog pauses jobs, and the next plan uses the measured peak."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.memjobs import (
    build_hog,
    cgroup_unavailable_reason,
    have_tools,
    memory_cgroup,
    write_makefile,
)

pytestmark = [pytest.mark.cgroup, pytest.mark.slow]
MiB = 1024 * 1024
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def jobs_project(tmp_path: Path) -> tuple[Path, Path]:
    reason = cgroup_unavailable_reason() or have_tools()
    if reason:
        pytest.skip(f"cannot run the cgroup proof here: {reason}")
    hog = build_hog(tmp_path / "src")
    return tmp_path / "src", hog


def _manifest(folder: Path, per_job_gb: float, margin_gb: float = 0.1) -> Path:
    text = (ROOT / "tests/builder/data/smoke.toml").read_text().replace(
        'name = "smoke"', 'name = "memproof"'
    )
    text += f"\n[build]\nmemory_per_job_gb = {per_job_gb}\nmemory_margin_gb = {margin_gb}\n"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "memproof.toml"
    path.write_text(text)
    return path


def _compile(manifest: Path, src: Path, venvs: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "builder", "compile", "--venv-root", str(venvs), "--json",
            *extra, str(manifest), "--", "make", "-C", str(src)]


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "NO_COLOR": "1"})


def test_naive_parallel_build_is_oom_killed_planned_one_finishes(
    jobs_project: tuple[Path, Path], tmp_path: Path
) -> None:
    src, hog = jobs_project
    write_makefile(src, hog, targets=6, peak_mb=200)
    with memory_cgroup(400 * MiB) as group:
        naive = _run(group.wrap(["make", "-C", str(src), "-j6"]))
        assert naive.returncode != 0
        assert group.oom_kills() > 0, naive.stderr
    _run(["make", "-C", str(src), "clean"])
    manifest = _manifest(tmp_path / "stacks", per_job_gb=0.2)
    with memory_cgroup(400 * MiB) as group:
        planned = _run(group.wrap(_compile(manifest, src, tmp_path / "envs", "--no-history")))
        assert planned.returncode == 0, planned.stderr
        assert group.oom_kills() == 0
    out = json.loads(planned.stdout)
    # The planner saw the cgroup's limit (not the host's memory) and sized jobs to it.
    assert out["plan"]["resources"]["cgroup_memory_limit"] == 400 * MiB
    assert out["plan"]["limited_by"] == "memory"
    assert out["plan"]["jobs"] == 1
    assert out["jobs_seen"] >= 6  # the hogs (plus any `touch` the sampler caught)


def test_watchdog_saves_a_bad_estimate_and_the_next_plan_is_measured(
    jobs_project: tuple[Path, Path], tmp_path: Path
) -> None:
    src, hog = jobs_project
    # Each job holds its peak for 1.5 s, so two started together certainly overlap.
    write_makefile(src, hog, targets=4, peak_mb=400, hold_ms=1500)
    # 8x too small; the margin is the room the running jobs have once the newest is paused.
    manifest = _manifest(tmp_path / "stacks", per_job_gb=0.05, margin_gb=0.25)
    venvs = tmp_path / "envs"
    with memory_cgroup(800 * MiB) as group:
        blind = _run(group.wrap(_compile(manifest, src, venvs, "--no-history", "--no-watchdog")))
        assert blind.returncode != 0 and group.oom_kills() > 0
    _run(["make", "-C", str(src), "clean"])
    with memory_cgroup(800 * MiB) as group:
        watched = _run(group.wrap(_compile(manifest, src, venvs, "--no-history")))
        assert watched.returncode == 0, watched.stderr
        assert group.oom_kills() == 0
    out = json.loads(watched.stdout)
    assert out["plan"]["jobs"] == 2 and out["pauses"] >= 1
    assert out["peak_job_rss"] >= 380 * MiB
    _run(["make", "-C", str(src), "clean"])
    with memory_cgroup(800 * MiB) as group:
        replanned = _run(group.wrap(_compile(manifest, src, venvs)))
        assert replanned.returncode == 0, replanned.stderr
    again = json.loads(replanned.stdout)
    assert again["plan"]["memory_per_job_source"] == "measured"
    assert again["plan"]["jobs"] == 1
