"""Pure parsers for host facts: nvidia-smi CSV and topology matrix, nvcc --version,
/proc/meminfo, /proc/swaps. Tested on recorded real outputs (tests/validators/fixtures)."""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field

from stackgate.topology import classify

NVIDIA_SMI_QUERY = "index,name,driver_version,compute_cap,memory.total,pci.bus_id"


class Gpu(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int
    name: str
    cc: tuple[int, int] | None = None
    memory_mib: int | None = None
    pci_bus_id: str | None = None


class GpuInventory(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

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

    def fully_nvlinked(self) -> bool:
        return classify(len(self.gpus), self.links) == "nvlink"


def _int(text: str) -> int | None:
    try:
        return int(float(text))
    except ValueError:
        return None


def parse_cc(text: str) -> tuple[int, int] | None:
    match = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def parse_nvidia_smi_query(text: str) -> tuple[str | None, list[Gpu]]:
    """`nvidia-smi --query-gpu=<NVIDIA_SMI_QUERY> --format=csv,noheader,nounits`."""
    driver: str | None = None
    gpus: list[Gpu] = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 6 or not parts[0].isdigit():
            continue
        driver = driver or parts[2]
        gpus.append(
            Gpu(
                index=int(parts[0]),
                name=parts[1],
                cc=parse_cc(parts[3]),
                memory_mib=_int(parts[4]),
                pci_bus_id=parts[5],
            )
        )
    return driver, gpus


def parse_topo_matrix(text: str) -> dict[str, str]:
    """`nvidia-smi topo -m`: link kind for each GPU pair, keyed "i-j" (i < j)."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    header_idx = next(
        (i for i, ln in enumerate(lines) if re.match(r"^\s*(\x1b\[[0-9;]*m)?\s*GPU0", ln)), None
    )
    if header_idx is None:
        return {}
    clean = [re.sub(r"\x1b\[[0-9;]*m", "", ln) for ln in lines]
    columns = clean[header_idx].split()
    gpu_cols = [c for c in columns if re.fullmatch(r"GPU\d+", c)]
    links: dict[str, str] = {}
    for row in clean[header_idx + 1 :]:
        cells = row.split()
        if not cells or not re.fullmatch(r"GPU\d+", cells[0]):
            continue
        i = int(cells[0][3:])
        for col, value in zip(gpu_cols, cells[1:], strict=False):
            j = int(col[3:])
            if i < j:
                links[f"{i}-{j}"] = value
    return links


def parse_nvcc_version(text: str) -> Version | None:
    """`nvcc --version`: "Cuda compilation tools, release 13.0, V13.0.88" -> 13.0.88."""
    match = re.search(r"release \d+\.\d+, V(\d+\.\d+(?:\.\d+)?)", text)
    if match is None:
        match = re.search(r"release (\d+\.\d+)", text)
    if match is None:
        return None
    try:
        return Version(match.group(1))
    except InvalidVersion:
        return None


def parse_meminfo(text: str) -> dict[str, int]:
    """/proc/meminfo in bytes: MemTotal, MemAvailable, SwapTotal, SwapFree (those present)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        match = re.match(r"^(\w+):\s+(\d+)(?:\s+kB)?", line)
        if match:
            out[match.group(1)] = int(match.group(2)) * (1024 if "kB" in line else 1)
    return out


def parse_swaps(text: str) -> list[str]:
    """/proc/swaps: the active swap devices (the header line is skipped)."""
    return [ln.split()[0] for ln in text.splitlines()[1:] if ln.strip()]
