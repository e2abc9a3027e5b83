"""One rule for which interconnect profile a host gets, shared by the builder and validators.

The PCIe NCCL tuning took the field's decode from ~63 to ~89 tok/s and made a 64 MB NVLink
all-reduce ~3x slower, so the builder (which bakes a profile into an env) and the validators
(which check that the env's profile fits the host) must decide the same way: a host is
'nvlink' only when every GPU pair is joined by NVLink (a TP ring over all GPUs then never
crosses PCIe); two or more GPUs otherwise is 'pcie'; one GPU or no GPU gets no profile.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping
from typing import Any

from stackgate.manifest import Topology

# nvmlGpuP2PCapsIndex_t values from nvml.h. nvidia-ml-py 13.610.43 and 13.615.71 define
# `NVML_P2P_CAPS_INDEX_READ = 0,` (a tuple), which ctypes cannot convert ("Don't know how to
# convert parameter 3", seen on the lent H200 host): the binding's constants are not used.
P2P_CAPS_INDEX_READ = 0
P2P_CAPS_INDEX_NVLINK = 2
P2P_STATUS_OK = 0


def p2p_status(pynvml: Any, a: Any, b: Any, index: int) -> int:
    return int(pynvml.nvmlDeviceGetP2PStatus(a, b, ctypes.c_uint(index)))


def nvlink_links(pynvml: Any, handles: list[Any]) -> dict[str, str]:
    """'i-j' -> 'NVLINK' or 'PCIE' for every GPU pair (NVML P2P status, NVLink index)."""
    links: dict[str, str] = {}
    for i in range(len(handles)):
        for j in range(i + 1, len(handles)):
            status = p2p_status(pynvml, handles[i], handles[j], P2P_CAPS_INDEX_NVLINK)
            links[f"{i}-{j}"] = "NVLINK" if status == P2P_STATUS_OK else "PCIE"
    return links


def classify(gpu_count: int, links: Mapping[str, str]) -> Topology | None:
    """'nvlink' when all pairs are NVLink ('NVLINK' or an nvidia-smi 'NV<n>' code)."""
    if gpu_count < 2:
        return None
    nvlinked = sum(1 for v in links.values() if v.upper().startswith("NV"))
    return "nvlink" if nvlinked == gpu_count * (gpu_count - 1) // 2 else "pcie"
