"""The interconnect profiles a host can get, and the one rule that picks one.

The PCIe NCCL tuning speeds up decode on PCIe hosts and makes a large NVLink all-reduce several
times slower (benchmarks/runtime_h200/results/README.md), so the builder (which bakes a profile
into an env), preflight (which checks that the env's profile fits the host) and the records'
host fingerprint must decide the same way: a host is 'nvlink' only when every GPU pair is
joined by NVLink (a TP ring over all GPUs then never crosses PCIe); two or more GPUs otherwise
is 'pcie'; one GPU or no GPU gets no profile. The rule is applied once, in
stackgate.host.snapshot; everything else reads its answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, get_args

Topology = Literal["pcie", "nvlink"]
# Every `choices=` list and the manifest's [environment.topology.*] keys derive from this.
TOPOLOGIES: tuple[Topology, ...] = get_args(Topology)


def classify(gpu_count: int, links: Mapping[str, str]) -> Topology | None:
    """'nvlink' when all pairs are NVLink ('NVLINK' or an nvidia-smi 'NV<n>' code)."""
    if gpu_count < 2:
        return None
    nvlinked = sum(1 for v in links.values() if v.upper().startswith("NV"))
    return "nvlink" if nvlinked == gpu_count * (gpu_count - 1) // 2 else "pcie"
