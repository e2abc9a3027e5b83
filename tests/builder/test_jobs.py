"""The job planner and the host-resource probes: parsers on recorded real file contents, probes
on real file trees laid out like /proc and /sys/fs/cgroup, plan arithmetic and its exports."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.compile.jobs import MEASURED_HEADROOM, plan_jobs
from stackgate.host.parsers import SwapDevice, parse_meminfo, parse_swaps
from stackgate.host.resources import (
    parse_cfs_quota,
    parse_cpu_max,
    parse_memory_limit,
    parse_proc_cgroup,
    probe_host_resources,
)
from stackgate.manifest import BuildSettings
from stackgate.resource_limits import GIB, HostResources

DATA = Path(__file__).parent / "data" / "proc"


def res(**kw: object) -> HostResources:
    base: dict[str, object] = {"affinity_cpus": 64, "mem_available": 256 * GIB,
                               "mem_total": 256 * GIB}
    base.update(kw)
    return HostResources.model_validate(base)


def test_parsers_read_real_formats() -> None:
    meminfo = parse_meminfo("MemTotal:       24683652 kB\nMemAvailable:   23000000 kB\n")
    assert meminfo["MemAvailable"] == 23000000 * 1024
    assert parse_swaps("Filename\tType\tSize\tUsed\tPriority\n") == []
    assert parse_swaps("Filename Type Size Used Priority\n/swap file 1048572 0 -2\n") == [
        SwapDevice("/swap", 1048572 * 1024)
    ]
    assert parse_cpu_max("max 100000\n") is None
    assert parse_cpu_max("250000 100000\n") == 2.5
    assert parse_cfs_quota("-1\n", "100000\n") is None
    assert parse_cfs_quota("400000", "100000") == 4.0
    assert parse_memory_limit("max\n") is None
    assert parse_memory_limit("9223372036854771712\n") is None  # v1 "unlimited"
    assert parse_memory_limit("17179869184\n") == 16 * GIB
    hybrid = parse_proc_cgroup((DATA / "cgroup-v1-hybrid.txt").read_text())
    assert "memory" in hybrid and "" in hybrid
    assert parse_proc_cgroup((DATA / "cgroup-v2.txt").read_text()) == {"": "/user.slice/build.scope"}


def _fake_root(tmp_path: Path, *, v2: bool) -> tuple[Path, Path]:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "meminfo").write_text("MemTotal: 67108864 kB\nMemAvailable: 60000000 kB\n")
    (proc / "swaps").write_text("Filename Type Size Used Priority\n")
    cg = tmp_path / "cgroup"
    if v2:
        (proc / "self" / "cgroup").write_text("0::/build.slice/job\n")
        job = cg / "build.slice" / "job"
        job.mkdir(parents=True)
        (cg / "cgroup.controllers").write_text("cpu memory\n")
        (cg / "build.slice" / "memory.max").write_text(str(8 * GIB))  # the parent binds
        (job / "memory.max").write_text("max\n")
        (job / "memory.current").write_text(str(GIB))
        (job / "memory.stat").write_text(f"inactive_file {GIB // 2}\n")
        (job / "cpu.max").write_text("300000 100000\n")
    else:
        (proc / "self" / "cgroup").write_text("4:memory:/job\n1:cpu:/job\n")
        mem = cg / "memory" / "job"
        mem.mkdir(parents=True)
        (mem / "memory.limit_in_bytes").write_text(str(4 * GIB))
        (mem / "memory.usage_in_bytes").write_text(str(GIB))
        (mem / "memory.stat").write_text(f"total_inactive_file {GIB}\n")
        cpu = cg / "cpu" / "job"
        cpu.mkdir(parents=True)
        (cpu / "cpu.cfs_quota_us").write_text("200000\n")
        (cpu / "cpu.cfs_period_us").write_text("100000\n")
    return proc, cg


def test_probe_v2_takes_the_lowest_limit_on_the_path(tmp_path: Path) -> None:
    proc, cg = _fake_root(tmp_path, v2=True)
    got = probe_host_resources(proc_root=proc, cgroup_root=cg)
    assert got.cgroup_version == "v2"
    assert got.cgroup_memory_limit == 8 * GIB
    assert got.cgroup_memory_used == GIB // 2
    assert got.usable_memory == 8 * GIB - GIB // 2
    assert got.cpu_quota == 3.0


def test_probe_v1(tmp_path: Path) -> None:
    proc, cg = _fake_root(tmp_path, v2=False)
    got = probe_host_resources(proc_root=proc, cgroup_root=cg)
    assert got.cgroup_version == "v1"
    assert got.usable_memory == 4 * GIB  # 4 GiB limit, usage all reclaimable cache
    assert got.usable_cpus == min(2, got.affinity_cpus)


def test_probe_of_this_host_is_sane() -> None:
    got = probe_host_resources()
    assert got.usable_cpus >= 1 and got.mem_total > 0


def test_memory_bound_plan_like_the_field() -> None:
    # The field: 128 jobs were OOM-killed on the no-swap host where 20 worked.
    plan = plan_jobs(BuildSettings(memory_per_job_gb=4.0, memory_margin_gb=4.0),
                     resources=res(affinity_cpus=128, mem_available=96 * GIB))
    assert plan.limited_by == "memory" and plan.jobs == 23
    assert plan.memory_budget_bytes == 92 * GIB


def test_cpu_quota_binds_before_affinity() -> None:
    plan = plan_jobs(BuildSettings(), resources=res(affinity_cpus=64, cpu_quota=6.5))
    assert plan.usable_cpus == 6 and plan.jobs == 6 and plan.limited_by == "cpu"


def test_nvcc_threads_multiply_memory_and_divide_cpus() -> None:
    plan = plan_jobs(BuildSettings(memory_per_job_gb=4.0, nvcc_threads=4, memory_margin_gb=0),
                     resources=res(affinity_cpus=64, mem_available=80 * GIB))
    assert plan.memory_per_job_bytes == 16 * GIB
    assert plan.jobs == 5
    assert plan.env()["NVCC_THREADS"] == "4"
    assert plan.env()["SGL_KERNEL_COMPILE_THREADS"] == "4"


def test_max_jobs_and_cgroup_limit() -> None:
    plan = plan_jobs(BuildSettings(max_jobs=3), resources=res())
    assert plan.jobs == 3 and plan.limited_by == "max_jobs"
    tight = plan_jobs(BuildSettings(memory_per_job_gb=4.0, memory_margin_gb=2.0),
                      resources=res(cgroup_memory_limit=16 * GIB, cgroup_memory_used=2 * GIB))
    assert tight.usable_memory_bytes == 14 * GIB and tight.jobs == 3


def test_too_little_memory_still_plans_one_job_and_says_so() -> None:
    plan = plan_jobs(BuildSettings(memory_per_job_gb=8.0), resources=res(mem_available=4 * GIB))
    assert plan.jobs == 1
    assert any("below one job" in r for r in plan.reasons)


def test_measured_peak_replaces_the_guess() -> None:
    plan = plan_jobs(BuildSettings(memory_per_job_gb=1.0, memory_margin_gb=0),
                     resources=res(mem_available=100 * GIB),
                     measured_peak_per_job_bytes=8 * GIB)
    assert plan.memory_per_job_source == "measured"
    assert plan.memory_per_job_bytes == int(8 * GIB * MEASURED_HEADROOM)
    assert plan.jobs == int(100 // (8 * MEASURED_HEADROOM))


@pytest.mark.parametrize("key", ["MAX_JOBS", "CMAKE_BUILD_PARALLEL_LEVEL", "MAKEFLAGS",
                                 "NVCC_THREADS", "SGL_KERNEL_COMPILE_THREADS",
                                 "FLASHINFER_NVCC_THREADS", "UV_CONCURRENT_BUILDS"])
def test_env_exports_every_build_system(key: str) -> None:
    plan = plan_jobs(BuildSettings(max_jobs=7), resources=res())
    env = plan.env()
    assert key in env
    assert env["MAKEFLAGS"] == "-j7" and env["NINJAFLAGS"] == "-j7"


def test_cuda_archs_reach_a_source_build_as_torch_cuda_arch_list(tmp_path: Path) -> None:
    """[build] cuda_archs was accepted and never read: source builds used their own archs."""
    import subprocess
    import sys

    from builder.compile.jobs import compile_env
    from stackgate.manifest.loading import load_stack

    cu128 = load_stack("cu128").manifest
    plan = plan_jobs(cu128.build, resources=res())
    assert compile_env(plan, cu128.build)["TORCH_CUDA_ARCH_LIST"] == "9.0a;12.0a"
    out = tmp_path / "seen.txt"
    code = f"import os; open({str(out)!r}, 'w').write(os.environ['TORCH_CUDA_ARCH_LIST'])"
    done = subprocess.run(
        [sys.executable, "-m", "builder", "compile", "--venv-root", str(tmp_path), "--no-history",
         "cu130", "--", sys.executable, "-c", code],
        capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert out.read_text() == "12.0a"
