"""Host fingerprint: probe it, and say how two fingerprints differ and whether that matters.

Parsers are pure (`parse_meminfo`, `parse_cpuinfo`); `probe_host()` reads /proc and NVML and
calls them. What NVML cannot tell (no driver, no GPU) stays None / "unknown".
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from stackgate.manifest import Manifest, arch_cc
from validators.records.model import GpuInfo, HostFingerprint

Impact = Literal["blocks", "performance", "info"]

_GIB = 1024**3


def parse_meminfo(text: str) -> tuple[float | None, float | None]:
    """(RAM GiB, swap GiB) from /proc/meminfo."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        match = re.match(r"^(\w+):\s+(\d+)\s*kB", line)
        if match:
            values[match[1]] = int(match[2]) * 1024
    ram = values.get("MemTotal")
    swap = values.get("SwapTotal")
    return (
        round(ram / _GIB, 1) if ram is not None else None,
        round(swap / _GIB, 1) if swap is not None else None,
    )


def parse_cpuinfo(text: str) -> str | None:
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            return value.strip()
    return None


def parse_nvcc_version(text: str) -> str | None:
    match = re.search(r"release (\d+\.\d+)", text)
    return match[1] if match else None


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _usable_cpus() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def _probe_gpus() -> tuple[GpuInfo, str | None, str | None, str]:
    """GPUs, driver, CUDA driver version and interconnect from NVML; empty when there is none."""
    try:
        import pynvml  # optional at runtime: no libnvidia-ml without a driver

        pynvml.nvmlInit()
    except Exception:
        return GpuInfo(), None, None, "unknown"
    try:
        count = int(pynvml.nvmlDeviceGetCount())
        driver = str(pynvml.nvmlSystemGetDriverVersion())
        cuda_raw = int(pynvml.nvmlSystemGetCudaDriverVersion())
        cuda = f"{cuda_raw // 1000}.{(cuda_raw % 1000) // 10}"
        models: list[str] = []
        ccs: set[str] = set()
        memory: float | None = None
        nvlink = False
        for i in range(count):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            models.append(str(pynvml.nvmlDeviceGetName(handle)))
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            ccs.add(f"{major}.{minor}")
            memory = round(int(pynvml.nvmlDeviceGetMemoryInfo(handle).total) / _GIB, 1)
            nvlink = nvlink or _has_active_nvlink(pynvml, handle)
        gpu = GpuInfo(
            model=models[0] if models else None,
            count=count,
            compute_capabilities=sorted(ccs),
            memory_gib=memory,
        )
        interconnect = "none" if count == 0 else ("nvlink" if nvlink else "pcie")
        return gpu, driver, cuda, interconnect
    except Exception:
        return GpuInfo(), None, None, "unknown"
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def _has_active_nvlink(pynvml: Any, handle: Any) -> bool:
    for link in range(18):  # NVML_NVLINK_MAX_LINKS on current GPUs
        try:
            if pynvml.nvmlDeviceGetNvLinkState(handle, link):
                return True
        except Exception:
            return False
    return False


def probe_host() -> HostFingerprint:
    from stackgate.proc import run

    ram, swap = parse_meminfo(_read("/proc/meminfo"))
    gpu, driver, cuda, interconnect = _probe_gpus()
    if gpu.count == 0 and interconnect == "unknown" and not Path("/dev/nvidia0").exists():
        interconnect = "none"
    nvcc: str | None = None
    if shutil.which("nvcc"):
        try:
            nvcc = parse_nvcc_version(run(["nvcc", "--version"], timeout=30).stdout)
        except Exception:
            nvcc = None
    return HostFingerprint(
        # In a pod the hostname is the pod's; the fleet jobs pass the node name (docs/fleet.md).
        hostname=os.environ.get("STACKGATE_HOSTNAME") or socket.gethostname(),
        gpu=gpu,
        driver=driver,
        cuda_driver=cuda,
        nvcc=nvcc,
        interconnect=interconnect,  # type: ignore[arg-type]
        cpu_model=parse_cpuinfo(_read("/proc/cpuinfo")),
        cpu_count=_usable_cpus(),
        ram_gib=ram,
        swap_gib=swap,
        kernel=platform.release(),
        source="probe",
    )


def target_mismatch(host: HostFingerprint, manifest: Manifest) -> list[str]:
    """Why this host cannot prove the stack for its targets; [] when it can."""
    problems: list[str] = []
    targets = manifest.host.target_archs
    if host.gpu.count == 0:
        problems.append(f"no NVIDIA GPU on this host; the stack targets {', '.join(targets)}")
        return problems
    wanted = {f"{arch_cc(a)[0]}.{arch_cc(a)[1]}" for a in targets}
    have = set(host.gpu.compute_capabilities)
    if not have & wanted:
        problems.append(
            f"host GPUs are CC {', '.join(sorted(have)) or 'unknown'}; "
            f"the stack targets {', '.join(targets)}"
        )
    if host.driver is not None and _version_tuple(host.driver) < _version_tuple(
        manifest.host.min_driver
    ):
        problems.append(
            f"driver {host.driver} is below the stack's min_driver {manifest.host.min_driver}"
        )
    return problems


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


@dataclass(frozen=True)
class HostDifference:
    field: str
    recorded: str
    here: str
    impact: Impact
    why: str


def _show(value: object) -> str:
    return "unknown" if value is None else str(value)


def diff_hosts(recorded: HostFingerprint, here: HostFingerprint) -> list[HostDifference]:
    """Every field that differs, with whether it blocks a faithful reproduction.

    blocks: the stack may not run or its kernels differ (GPU arch, GPU count for TP).
    performance: numbers are not comparable (GPU model, interconnect, driver, CPU, RAM).
    info: worth knowing, changes neither (hostname, kernel build, swap when both have none).
    """
    out: list[HostDifference] = []

    def add(field: str, a: object, b: object, impact: Impact, why: str) -> None:
        if a == b:
            return
        if a is None or b is None:
            # Not known to differ: one side could not tell (a probe that cannot tell says so).
            impact, why = "info", f"unknown on one side; {why}"
        out.append(HostDifference(field, _show(a), _show(b), impact, why))

    add(
        "gpu.compute_capabilities",
        recorded.gpu.compute_capabilities,
        here.gpu.compute_capabilities,
        "blocks",
        "other GPU arch: different kernels (cubins/PTX) run, or none do",
    )
    add(
        "gpu.count",
        recorded.gpu.count,
        here.gpu.count,
        "blocks",
        "tensor parallel size and the all-reduce path depend on the GPU count",
    )
    add(
        "gpu.model",
        recorded.gpu.model,
        here.gpu.model,
        "performance",
        "another GPU model: benchmark numbers are not comparable",
    )
    add(
        "interconnect",
        recorded.interconnect,
        here.interconnect,
        "performance",
        "the NCCL profile is chosen per topology; all-reduce cost differs",
    )
    add(
        "driver",
        recorded.driver,
        here.driver,
        "performance",
        "driver changes JIT/PTX behaviour and may change performance",
    )
    add(
        "cuda_driver",
        recorded.cuda_driver,
        here.cuda_driver,
        "performance",
        "the CUDA version the driver supports bounds what the stack can load",
    )
    add(
        "nvcc",
        recorded.nvcc,
        here.nvcc,
        "performance",
        "FlashInfer/Triton JIT compile with the host nvcc",
    )
    add(
        "gpu.memory_gib",
        recorded.gpu.memory_gib,
        here.gpu.memory_gib,
        "performance",
        "KV cache size (and so max concurrency) follows GPU memory",
    )
    add(
        "cpu_model",
        recorded.cpu_model,
        here.cpu_model,
        "performance",
        "tokenization and scheduling run on the CPU",
    )
    add(
        "cpu_count",
        recorded.cpu_count,
        here.cpu_count,
        "performance",
        "fewer CPUs can starve the scheduler and tokenizer processes",
    )
    add(
        "ram_gib",
        recorded.ram_gib,
        here.ram_gib,
        "performance",
        "weights are staged through host RAM while loading",
    )
    add(
        "swap_gib",
        recorded.swap_gib,
        here.swap_gib,
        "info",
        "swap changes how memory pressure fails (OOM kill vs slowdown)",
    )
    add("kernel", recorded.kernel, here.kernel, "info", "kernel build")
    add("hostname", recorded.hostname, here.hostname, "info", "another machine")
    return out


def parse_host_evidence(host: dict[str, Any]) -> dict[str, Any]:
    """Fingerprint fields from a run report's host block ({check: evidence} of the host group).

    Only what the host group measured: GPUs, driver, interconnect, nvcc, memory. Pure.
    """
    out: dict[str, Any] = {}
    gpus = host.get("host.gpus")
    if isinstance(gpus, dict) and isinstance(gpus.get("count"), int):
        models = gpus.get("models") or []
        ccs = gpus.get("ccs") or []
        out["gpu"] = GpuInfo(
            model=str(models[0]) if models else None,
            count=int(gpus["count"]),
            compute_capabilities=sorted(
                {f"{c[0]}.{c[1]}" for c in ccs if isinstance(c, list | tuple) and len(c) == 2}
            ),
        )
    driver = host.get("host.driver")
    if isinstance(driver, dict):
        if isinstance(driver.get("driver"), str):
            out["driver"] = driver["driver"]
        if isinstance(driver.get("driver_cuda"), str):
            out["cuda_driver"] = driver["driver_cuda"]
    link = host.get("host.interconnect")
    if isinstance(link, dict) and link.get("detected") in ("pcie", "nvlink"):
        out["interconnect"] = link["detected"]
    nvcc = host.get("host.nvcc")
    if isinstance(nvcc, dict) and isinstance(nvcc.get("nvcc"), str):
        out["nvcc"] = nvcc["nvcc"]
    memory = host.get("host.memory")
    if isinstance(memory, dict):
        for key, field in (("MemTotal", "ram_gib"), ("SwapTotal", "swap_gib")):
            if isinstance(memory.get(key), int):
                out[field] = round(memory[key] / _GIB, 1)
    return out


def fingerprint_for_run(host: dict[str, Any], local: HostFingerprint) -> HostFingerprint:
    """The host a run report was made on.

    A `fingerprint` block wins; else the host group's evidence, completed with this machine's
    probe only when this machine has the same GPUs and driver (so it is that host, or its twin);
    else the local probe (no host group ran: mark-good/gate run where the validation ran).
    """
    explicit = host.get("fingerprint")
    if isinstance(explicit, dict):
        try:
            return HostFingerprint.model_validate({**explicit, "source": "run report"})
        except ValueError:
            pass
    measured = parse_host_evidence(host)
    if "gpu" not in measured and "driver" not in measured:
        return local
    same = (
        measured.get("gpu", local.gpu) == local.gpu
        and measured.get("driver", local.driver) == local.driver
    )
    if same:
        return local.model_copy(update={**measured, "source": "run report + local probe"})
    return HostFingerprint(**measured, source="run report (CPU, kernel, hostname unknown)")
