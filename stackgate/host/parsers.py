"""Pure parsers for host facts, tested on recorded real outputs (tests/validators/fixtures):
/proc/meminfo, /proc/swaps, /proc/cpuinfo, `nvcc --version`, nvidia-smi's CSV query and
`nvidia-smi topo -m`. No parser reads a file or runs a program."""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

NVIDIA_SMI_QUERY = "index,name,driver_version,compute_cap,memory.total,pci.bus_id"


@dataclass(frozen=True)
class SwapDevice:
    name: str
    size_bytes: int


def parse_meminfo(text: str) -> dict[str, int]:
    """/proc/meminfo -> {key: bytes} ('kB' values scaled; unit-less counters kept as is)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if not parts or not key.strip():
            continue
        try:
            value = int(parts[0])
        except ValueError:
            continue
        out[key.strip()] = value * 1024 if len(parts) > 1 and parts[1] == "kB" else value
    return out


def parse_swaps(text: str) -> list[SwapDevice]:
    """/proc/swaps: the active swap devices and their sizes (KiB in the file; the first line
    is a header)."""
    devices: list[SwapDevice] = []
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 3:
            size = int(parts[2]) * 1024 if parts[2].isdigit() else 0
            devices.append(SwapDevice(parts[0], size))
    return devices


def parse_cpuinfo(text: str) -> str | None:
    """The CPU model name from /proc/cpuinfo."""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            return value.strip()
    return None


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


def parse_cc(text: str) -> tuple[int, int] | None:
    match = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _int(text: str) -> int | None:
    try:
        return int(float(text))
    except ValueError:
        return None


@dataclass(frozen=True)
class SmiGpu:
    """One row of nvidia-smi's CSV query."""

    index: int
    name: str
    driver: str
    cc: tuple[int, int] | None
    memory_mib: int | None
    pci_bus_id: str


def parse_nvidia_smi_query(text: str) -> list[SmiGpu]:
    """`nvidia-smi --query-gpu=<NVIDIA_SMI_QUERY> --format=csv,noheader,nounits`."""
    gpus: list[SmiGpu] = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 6 or not parts[0].isdigit():
            continue
        gpus.append(
            SmiGpu(
                index=int(parts[0]),
                name=parts[1],
                driver=parts[2],
                cc=parse_cc(parts[3]),
                memory_mib=_int(parts[4]),
                pci_bus_id=parts[5],
            )
        )
    return gpus


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
