"""Which interconnect joins this host's GPUs (the host snapshot), or what --topology says.

The topology picks the environment profile (stacks' [environment.topology.*]): the PCIe NCCL
tuning that speeds up decode on PCIe hosts slows NVLink all-reduce (stackgate.topology), so
a wrong guess costs real throughput. A host whose GPUs cannot be inventoried (no driver,
no GPU) gets no profile rather than a guess. The rule itself is stackgate.topology.classify,
applied once by stackgate.host.snapshot, so preflight and the records' fingerprint agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from stackgate.build_record import TopologySource
from stackgate.host.snapshot import HostSnapshot, host_snapshot
from stackgate.topology import Topology


@dataclass(frozen=True)
class TopologyChoice:
    topology: Topology | None
    source: TopologySource
    detail: str


def detect_topology(snapshot: HostSnapshot | None = None) -> TopologyChoice:
    snap = snapshot if snapshot is not None else host_snapshot()
    inv = snap.inventory
    if inv is None:
        return TopologyChoice(None, "none", snap.gpus.reason)
    nvlinked = len(inv.nvlink_pairs())
    detail = f"{len(inv.gpus)} GPU(s), {nvlinked} of {len(inv.links)} pair(s) joined by NVLink"
    if snap.topology is None:
        return TopologyChoice(None, "none", f"{detail}: no interconnect profile")
    source: TopologySource = "nvml" if inv.source == "nvml" else "nvidia-smi"
    return TopologyChoice(snap.topology, source, detail)


def choose_topology(flag: Topology | None) -> TopologyChoice:
    if flag is not None:
        return TopologyChoice(flag, "flag", f"--topology {flag}")
    return detect_topology()
