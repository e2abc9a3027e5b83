"""Which interconnect joins this host's GPUs: NVLink or PCIe (NVML), or what --topology says.

The topology picks the environment profile (stacks' [environment.topology.*]): the PCIe NCCL
tuning that took the field's decode from ~63 to ~89 tok/s made NVLink all-reduce 3x slower,
so a wrong guess costs real throughput. A host where NVML cannot tell (no driver, no GPU)
gets no profile rather than a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from stackgate.manifest import Topology

TopologySource = Literal["flag", "nvml", "none"]


@dataclass(frozen=True)
class TopologyChoice:
    topology: Topology | None
    source: TopologySource
    detail: str


def _active_nvlink(nvml: Any, handle: Any) -> bool:
    for link in range(int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))):
        try:
            if nvml.nvmlDeviceGetNvLinkState(handle, link):
                return True
        except Exception:  # NVML raises per unsupported link; absent links are not errors
            continue
    return False


def detect_topology() -> TopologyChoice:
    """NVML: any GPU with an active NVLink -> 'nvlink'; GPUs without -> 'pcie'; else none."""
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
        if count == 0:
            return TopologyChoice(None, "none", "NVML sees no GPU")
        linked = sum(
            1 for i in range(count) if _active_nvlink(pynvml, pynvml.nvmlDeviceGetHandleByIndex(i))
        )
    finally:
        pynvml.nvmlShutdown()
    if linked:
        return TopologyChoice("nvlink", "nvml", f"{linked} of {count} GPU(s) have active NVLink")
    return TopologyChoice("pcie", "nvml", f"{count} GPU(s), no active NVLink")


def choose_topology(flag: Topology | None) -> TopologyChoice:
    if flag is not None:
        return TopologyChoice(flag, "flag", f"--topology {flag}")
    return detect_topology()
