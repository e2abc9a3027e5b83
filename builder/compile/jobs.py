"""The job planner: how many compile jobs a source build may run without meeting the OOM killer.

jobs = min(usable CPUs, floor((usable memory - margin) / memory per job), manifest max_jobs)

- usable CPUs: sched_getaffinity capped by the cgroup CPU quota (spack does the same; never
  os.cpu_count(), which sees the whole host).
- usable memory: MemAvailable capped by the cgroup's memory headroom. Swap is never counted:
  the user's hosts have none, and a build that swaps is as good as dead anyway.
- memory per job: the manifest's `build.memory_per_job_gb` for one nvcc thread, times
  `build.nvcc_threads` (nvcc --threads compiles that many archs at once, each with its own
  cicc/ptxas: flash-attn PR #2079 measured 3-5 GB *per thread*). When an earlier build of the
  stack was measured by the watchdog, its peak RSS per job (plus a headroom) replaces the guess.

Every build system reads parallelism differently, so `JobPlan.env()` exports them all: ninja
through torch's cpp_extension reads MAX_JOBS, CMake CMAKE_BUILD_PARALLEL_LEVEL, make MAKEFLAGS,
sgl-kernel SGL_KERNEL_COMPILE_THREADS (its nvcc --threads, default 32 which OOMs: sglang
#25667), FlashInfer FLASHINFER_NVCC_THREADS, and UV_CONCURRENT_BUILDS=1 so that uv does not
build several source packages side by side and multiply the plan.
"""

from __future__ import annotations

import math
from typing import Literal

from stackgate.build_record import JobPlan, LimitedBy
from stackgate.host.resources import probe_host_resources
from stackgate.manifest import BuildSettings
from stackgate.resource_limits import GIB, HostResources

# A measured peak is one sample of a noisy quantity (the biggest translation unit may not have
# overlapped the others last time); plan with this much on top.
MEASURED_HEADROOM = 1.1


def plan_jobs(
    settings: BuildSettings,
    *,
    resources: HostResources | None = None,
    measured_peak_per_job_bytes: int | None = None,
) -> JobPlan:
    """Size compile parallelism to the CPUs and memory this process may use."""
    res = resources if resources is not None else probe_host_resources()
    reasons: list[str] = []
    threads = settings.nvcc_threads

    cpus = res.usable_cpus
    cpu_note = f"{res.affinity_cpus} CPUs in affinity"
    if res.cpu_quota is not None:
        cpu_note += f", cgroup quota {res.cpu_quota:g} cores"
    # Each nvcc thread is a busy process too: N jobs x T threads should fit the CPUs.
    cpu_jobs = max(1, cpus // threads)
    reasons.append(f"CPU: {cpu_note} -> {cpus} usable, / {threads} nvcc thread(s) = {cpu_jobs}")

    usable = res.usable_memory
    mem_note = f"MemAvailable {res.mem_available / GIB:.1f} GiB"
    if res.cgroup_memory_limit is not None:
        mem_note += (
            f", cgroup limit {res.cgroup_memory_limit / GIB:.1f} GiB with "
            f"{(res.cgroup_memory_used or 0) / GIB:.1f} GiB in use"
        )
    margin = int(settings.memory_margin_gb * GIB)
    budget = max(0, usable - margin)

    if measured_peak_per_job_bytes is not None and measured_peak_per_job_bytes > 0:
        per_job = int(measured_peak_per_job_bytes * MEASURED_HEADROOM)
        source: Literal["manifest", "measured"] = "measured"
        per_note = (
            f"measured peak {measured_peak_per_job_bytes / GIB:.2f} GiB per job "
            f"x {MEASURED_HEADROOM} headroom"
        )
    else:
        per_job = int(settings.memory_per_job_gb * GIB * threads)
        source = "manifest"
        per_note = f"manifest {settings.memory_per_job_gb:g} GB per nvcc thread x {threads}"
    mem_jobs = max(1, math.floor(budget / per_job)) if per_job > 0 else cpu_jobs
    reasons.append(
        f"memory: {mem_note} -> {usable / GIB:.1f} GiB usable - {settings.memory_margin_gb:g} "
        f"GiB margin = {budget / GIB:.1f} GiB; / {per_note} = {mem_jobs}"
    )
    if budget < per_job:
        reasons.append(
            "memory: the budget is below one job's estimate; running 1 job (the watchdog "
            "pauses it rather than letting the OOM killer end the build)"
        )
    swap_note = "no swap" if res.swap_total == 0 else f"{res.swap_total / GIB:.1f} GiB swap"
    reasons.append(f"swap: {swap_note}; never counted as build memory")

    candidates: list[tuple[int, LimitedBy]] = [(mem_jobs, "memory"), (cpu_jobs, "cpu")]
    if settings.max_jobs is not None:
        candidates.append((settings.max_jobs, "max_jobs"))
        reasons.append(f"manifest max_jobs = {settings.max_jobs}")
    jobs, limited_by = min(candidates, key=lambda c: c[0])
    reasons.append(f"plan: {jobs} job(s), limited by {limited_by}")
    return JobPlan(
        jobs=max(1, jobs),
        nvcc_threads=threads,
        limited_by=limited_by,
        usable_cpus=cpus,
        usable_memory_bytes=usable,
        memory_margin_bytes=margin,
        memory_budget_bytes=budget,
        memory_per_job_bytes=per_job,
        memory_per_job_source=source,
        swap_bytes=res.swap_total,
        resources=res,
        reasons=reasons,
    )


def compile_env(plan: JobPlan, settings: BuildSettings) -> dict[str, str]:
    """Everything a source build reads: the plan's parallelism and the manifest's archs.

    `[build] cuda_archs` becomes TORCH_CUDA_ARCH_LIST (torch.utils.cpp_extension, and the
    CMake builds that take it from torch), so source builds compile for the stack's targets
    instead of their own default list ("12.0a" is torch's spelling of sm_120a).
    """
    env = plan.env()
    if settings.cuda_archs:
        env["TORCH_CUDA_ARCH_LIST"] = ";".join(settings.cuda_archs)
    return env
