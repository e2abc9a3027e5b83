"""The GPU inventory: NVML first (exact P2P status), nvidia-smi when NVML cannot be loaded.

A probe that cannot tell returns `Probed(None, reason)`, never a guess.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import Field

from stackgate import proc
from stackgate.errors import StackgateError
from stackgate.host.nvml import nvml, text
from stackgate.host.parsers import (
    NVIDIA_SMI_QUERY,
    SmiGpu,
    parse_nvidia_smi_query,
    parse_topo_matrix,
)
from stackgate.model import StrictModel

T = TypeVar("T")

# nvmlGpuP2PCapsIndex_t values from nvml.h. nvidia-ml-py 13.610.43 and 13.615.71 define
# `NVML_P2P_CAPS_INDEX_READ = 0,` (a tuple), which ctypes cannot convert ("Don't know how to
# convert parameter 3"): the binding's constants are not used.
P2P_CAPS_INDEX_READ = 0
P2P_CAPS_INDEX_NVLINK = 2
P2P_STATUS_OK = 0


@dataclass(frozen=True)
class Probed(Generic[T]):
    """A probe's answer: the value, or None and why not."""

    value: T | None
    reason: str = ""


class Gpu(StrictModel):
    index: int
    name: str
    cc: tuple[int, int] | None = None
    memory_mib: int | None = None
    pci_bus_id: str | None = None


class GpuInventory(StrictModel):
    source: str = Field(description="nvml or nvidia-smi")
    driver: str | None = None
    cuda_driver_version: str | None = Field(default=None, description="max CUDA the driver runs")
    gpus: list[Gpu] = Field(default_factory=list)
    # (i, j) -> link: "NVLINK" / "PCIE" / an nvidia-smi topo code such as "NV18", "PIX", "SYS"
    links: dict[str, str] = Field(default_factory=dict)
    p2p_failures: list[str] = Field(default_factory=list)
    p2p_error: str | None = Field(default=None, description="why P2P status is unknown")

    @property
    def ccs(self) -> tuple[tuple[int, int], ...]:
        return tuple(sorted({g.cc for g in self.gpus if g.cc is not None}))

    def nvlink_pairs(self) -> list[str]:
        return sorted(k for k, v in self.links.items() if v.upper().startswith("NV"))


def p2p_status(pynvml: Any, a: Any, b: Any, index: int) -> int:
    return int(pynvml.nvmlDeviceGetP2PStatus(a, b, ctypes.c_uint(index)))


def probe_nvml() -> Probed[GpuInventory]:
    session = nvml()
    pynvml = session.module
    if pynvml is None:
        return Probed(None, session.reason)
    try:
        driver = text(pynvml.nvmlSystemGetDriverVersion())
        cuda_v = int(pynvml.nvmlSystemGetCudaDriverVersion_v2())
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        gpus: list[Gpu] = []
        for i, h in enumerate(handles):
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
            gpus.append(
                Gpu(
                    index=i,
                    name=text(pynvml.nvmlDeviceGetName(h)),
                    cc=(int(major), int(minor)),
                    memory_mib=int(pynvml.nvmlDeviceGetMemoryInfo(h).total) // (1 << 20),
                    pci_bus_id=text(pynvml.nvmlDeviceGetPciInfo(h).busId),
                )
            )
        links: dict[str, str] = {}
        failures: list[str] = []
        p2p_error: str | None = None
        for i in range(len(handles)):
            for j in range(i + 1, len(handles)):
                try:
                    nv = p2p_status(pynvml, handles[i], handles[j], P2P_CAPS_INDEX_NVLINK)
                    rd = p2p_status(pynvml, handles[i], handles[j], P2P_CAPS_INDEX_READ)
                except Exception as exc:
                    p2p_error = f"nvmlDeviceGetP2PStatus failed: {exc}"
                    continue
                links[f"{i}-{j}"] = "NVLINK" if nv == P2P_STATUS_OK else "PCIE"
                if rd != P2P_STATUS_OK:
                    failures.append(f"GPU{i}-GPU{j}: P2P read status {rd}")
    except Exception as exc:
        return Probed(None, f"NVML query failed: {exc}")
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


def probe_nvidia_smi() -> Probed[GpuInventory]:
    if proc.find("nvidia-smi") is None:
        return Probed(None, "nvidia-smi not found on PATH")
    try:
        done = proc.run(
            ["nvidia-smi", f"--query-gpu={NVIDIA_SMI_QUERY}", "--format=csv,noheader,nounits"],
            timeout=30,
        )
        rows = parse_nvidia_smi_query(done.stdout)
        topo = proc.run(["nvidia-smi", "topo", "-m"], timeout=30, check=False)
    except StackgateError as exc:
        return Probed(None, f"nvidia-smi failed: {exc.message}")
    return Probed(inventory_from_smi(rows, parse_topo_matrix(topo.stdout)))


def inventory_from_smi(rows: list[SmiGpu], links: dict[str, str]) -> GpuInventory:
    return GpuInventory(
        source="nvidia-smi",
        driver=rows[0].driver if rows else None,
        gpus=[
            Gpu(
                index=r.index,
                name=r.name,
                cc=r.cc,
                memory_mib=r.memory_mib,
                pci_bus_id=r.pci_bus_id,
            )
            for r in rows
        ],
        links=links,
    )


def probe_gpus() -> Probed[GpuInventory]:
    """NVML first (exact P2P status), nvidia-smi when the Python binding cannot load NVML."""
    from_nvml = probe_nvml()
    if from_nvml.value is not None:
        return from_nvml
    smi = probe_nvidia_smi()
    if smi.value is not None:
        return smi
    return Probed(None, f"{from_nvml.reason}; {smi.reason}")
