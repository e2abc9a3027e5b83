"""Which interconnect joins this host's GPUs: NVLink or PCIe (NVML), or what --topology says.

The topology picks the environment profile (stacks' [environment.topology.*]): the PCIe NCCL
tuning that took the field's decode from ~63 to ~89 tok/s made NVLink all-reduce 3x slower,
so a wrong guess costs real throughput. A host where NVML cannot tell (no driver, no GPU)
gets no profile rather than a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from stackgate.manifest import Topology
from stackgate.topology import classify, nvlink_links

TopologySource = Literal["flag", "nvml", "none"]


@dataclass(frozen=True)
class TopologyChoice:
    topology: Topology | None
    source: TopologySource
    detail: str


def detect_topology() -> TopologyChoice:
    """NVML pairwise NVLink status, classified by stackgate.topology (the validators' rule)."""
    try:
        import pynvml
    except ImportError:
        return TopologyChoice(None, "none", "pynvml not installed")
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return TopologyChoice(None, "none", f"NVML unavailable: {exc}")
    try:
        count = int(pynvml.nvmlDeviceGetCount())
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        links = nvlink_links(pynvml, handles)
    except Exception as exc:  # a driver that cannot answer P2P status: no guess
        return TopologyChoice(None, "none", f"NVML P2P status failed: {exc}")
    finally:
        pynvml.nvmlShutdown()
    topology = classify(count, links)
    nvlinked = sum(1 for v in links.values() if v == "NVLINK")
    detail = f"{count} GPU(s), {nvlinked} of {len(links)} pair(s) joined by NVLink"
    if topology is None:
        return TopologyChoice(None, "none", f"{detail}: no interconnect profile")
    return TopologyChoice(topology, "nvml", detail)


def choose_topology(flag: Topology | None) -> TopologyChoice:
    if flag is not None:
        return TopologyChoice(flag, "flag", f"--topology {flag}")
    return detect_topology()
