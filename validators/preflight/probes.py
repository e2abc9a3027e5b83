"""Probes that ask the machine (NVML, nvidia-smi, nvcc, /proc, the filesystem) and hand the
text to the pure parsers. A probe that cannot tell returns None with the reason, never a guess."""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import Version

from stackgate import proc
from stackgate.errors import StackgateError
from stackgate.topology import (
    P2P_CAPS_INDEX_NVLINK,
    P2P_CAPS_INDEX_READ,
    P2P_STATUS_OK,
    p2p_status,
)
from validators.preflight.parsers import (
    NVIDIA_SMI_QUERY,
    Gpu,
    GpuInventory,
    parse_meminfo,
    parse_nvcc_version,
    parse_nvidia_smi_query,
    parse_swaps,
    parse_topo_matrix,
)


@dataclass(frozen=True)
class Probed:
    """A probe's answer: the value, or None and why not."""

    value: Any
    reason: str = ""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def probe_nvml() -> Probed:
    try:
        import pynvml
    except ImportError as exc:
        return Probed(None, f"nvidia-ml-py not importable: {exc}")
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound / DriverNotLoaded
        return Probed(None, f"NVML unavailable: {exc} (no NVIDIA driver on this host)")
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        cuda_v = int(pynvml.nvmlSystemGetCudaDriverVersion_v2())
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        gpus: list[Gpu] = []
        for i, h in enumerate(handles):
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            pci = pynvml.nvmlDeviceGetPciInfo(h)
            gpus.append(
                Gpu(
                    index=i,
                    name=_text(pynvml.nvmlDeviceGetName(h)),
                    cc=(major, minor),
                    memory_mib=int(mem.total) // (1 << 20),
                    pci_bus_id=_text(pci.busId),
                )
            )
        links: dict[str, str] = {}
        failures: list[str] = []
        p2p_error: str | None = None
        ok = P2P_STATUS_OK
        for i in range(len(handles)):
            for j in range(i + 1, len(handles)):
                try:
                    nv = p2p_status(pynvml, handles[i], handles[j], P2P_CAPS_INDEX_NVLINK)
                    rd = p2p_status(pynvml, handles[i], handles[j], P2P_CAPS_INDEX_READ)
                except Exception as exc:
                    p2p_error = f"nvmlDeviceGetP2PStatus failed: {exc}"
                    continue
                links[f"{i}-{j}"] = "NVLINK" if nv == ok else "PCIE"
                if rd != ok:
                    failures.append(f"GPU{i}-GPU{j}: P2P read status {rd}")
        inventory = GpuInventory(
            source="nvml",
            driver=driver,
            cuda_driver_version=f"{cuda_v // 1000}.{(cuda_v % 1000) // 10}",
            gpus=gpus,
            links=links,
            p2p_failures=failures,
            p2p_error=p2p_error,
        )
        if p2p_error is not None:
            # Links from nvidia-smi's topology matrix instead; P2P read status stays unknown.
            smi = probe_nvidia_smi()
            if smi.value is not None:
                inventory = inventory.model_copy(update={"links": smi.value.links})
        return Probed(inventory)
    except Exception as exc:
        return Probed(None, f"NVML query failed: {exc}")
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def probe_nvidia_smi() -> Probed:
    if shutil.which("nvidia-smi") is None:
        return Probed(None, "nvidia-smi not found on PATH")
    try:
        done = proc.run(
            ["nvidia-smi", f"--query-gpu={NVIDIA_SMI_QUERY}", "--format=csv,noheader,nounits"],
            timeout=30,
        )
        driver, gpus = parse_nvidia_smi_query(done.stdout)
        topo = proc.run(["nvidia-smi", "topo", "-m"], timeout=30, check=False)
    except StackgateError as exc:
        return Probed(None, f"nvidia-smi failed: {exc.message}")
    return Probed(
        GpuInventory(
            source="nvidia-smi", driver=driver, gpus=gpus, links=parse_topo_matrix(topo.stdout)
        )
    )


def probe_gpus() -> Probed:
    """NVML first (exact P2P status), nvidia-smi when the Python binding cannot load NVML."""
    nvml = probe_nvml()
    if nvml.value is not None:
        return nvml
    smi = probe_nvidia_smi()
    if smi.value is not None:
        return smi
    return Probed(None, f"{nvml.reason}; {smi.reason}")


def probe_nvcc() -> Probed:
    candidates = [shutil.which("nvcc")]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(str(Path(os.environ[var]) / "bin" / "nvcc"))
    for nvcc in candidates:
        if nvcc and Path(nvcc).is_file():
            try:
                done = proc.run([nvcc, "--version"], timeout=30)
            except StackgateError as exc:
                return Probed(None, f"{nvcc} --version failed: {exc.message}")
            version = parse_nvcc_version(done.stdout)
            if version is None:
                return Probed(None, f"cannot read a version from {nvcc} --version")
            return Probed((version, nvcc))
    return Probed(None, "nvcc not found on PATH or under CUDA_HOME")


def probe_memory() -> Probed:
    try:
        info = parse_meminfo(Path("/proc/meminfo").read_text(encoding="utf-8"))
    except OSError as exc:
        return Probed(None, f"cannot read /proc/meminfo: {exc}")
    try:
        swaps = parse_swaps(Path("/proc/swaps").read_text(encoding="utf-8"))
    except OSError:
        swaps = []
    limit: int | None = None
    try:
        raw = Path("/sys/fs/cgroup/memory.max").read_text(encoding="utf-8").strip()
        limit = None if raw == "max" else int(raw)
    except (OSError, ValueError):
        pass
    return Probed({**info, "swap_devices": swaps, "cgroup_memory_max": limit})


def probe_disk(path: Path) -> Probed:
    probe_at = path
    while not probe_at.exists() and probe_at != probe_at.parent:
        probe_at = probe_at.parent
    try:
        usage = shutil.disk_usage(probe_at)
    except OSError as exc:
        return Probed(None, f"cannot stat {probe_at}: {exc}")
    return Probed({"path": str(probe_at), "free": usage.free, "total": usage.total})


def nvcc_version(probed: Probed) -> Version | None:
    return probed.value[0] if probed.value is not None else None
