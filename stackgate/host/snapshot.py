"""One snapshot of the host, probed once per process: GPUs, topology, nvcc, memory, identity.

The builder (topology for the env profile, host block of the build record), preflight (host
checks) and the records' fingerprint read the same `HostSnapshot`, so a host cannot be
'nvlink' to one and 'pcie' to another: `topology` applies stackgate.topology.classify to the
one inventory. `host_snapshot()` caches the answer for the process; `take_snapshot()` probes
afresh (tests, long-lived processes that must see a change).
"""

from __future__ import annotations

import functools
import os
import platform
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version
from pydantic import Field

from stackgate import proc
from stackgate.errors import StackgateError
from stackgate.host.gpus import GpuInventory, Probed, probe_gpus
from stackgate.host.parsers import parse_cpuinfo, parse_meminfo, parse_nvcc_version, parse_swaps
from stackgate.host.resources import probe_host_resources
from stackgate.manifest.rules import HostRuleFacts
from stackgate.model import StrictModel
from stackgate.settings import value
from stackgate.topology import Topology, classify


@dataclass(frozen=True)
class NvccInfo:
    version: Version
    path: str


class MemoryFacts(StrictModel):
    meminfo: dict[str, int] = Field(description="/proc/meminfo in bytes.")
    swap_devices: list[str] = Field(default_factory=list)
    cgroup_memory_max: int | None = Field(
        default=None, description="Lowest cgroup memory limit on this process's path."
    )

    def evidence(self) -> dict[str, Any]:
        return {
            **self.meminfo,
            "swap_devices": self.swap_devices,
            "cgroup_memory_max": self.cgroup_memory_max,
        }


class HostIdentity(StrictModel):
    hostname: str
    kernel: str
    machine: str
    os_release: str = Field(description="PRETTY_NAME from /etc/os-release, or 'unknown'.")
    cpu_model: str | None = None
    affinity_cpus: int = Field(description="len(os.sched_getaffinity(0)).")


@dataclass(frozen=True)
class HostSnapshot:
    gpus: Probed[GpuInventory]
    nvcc: Probed[NvccInfo]
    memory: Probed[MemoryFacts]
    identity: HostIdentity | None = None

    @property
    def inventory(self) -> GpuInventory | None:
        return self.gpus.value

    @property
    def topology(self) -> Topology | None:
        """The interconnect profile this host gets (None: fewer than 2 GPUs, or unknown)."""
        inv = self.gpus.value
        return None if inv is None else classify(len(inv.gpus), inv.links)

    def rule_facts(self) -> HostRuleFacts:
        inv = self.gpus.value
        driver: Version | None = None
        if inv is not None and inv.driver:
            try:
                driver = Version(inv.driver)
            except InvalidVersion:
                driver = None
        nvcc = self.nvcc.value
        return HostRuleFacts(
            driver=driver,
            nvcc=nvcc.version if nvcc else None,
            gpu_ccs=inv.ccs if inv else (),
        )

    def as_dict(self) -> dict[str, Any]:
        """The host block of a run report."""
        inv = self.gpus.value
        nvcc = self.nvcc.value
        mem = self.memory.value
        return {
            "gpus": inv.model_dump(mode="json") if inv else None,
            "gpus_reason": self.gpus.reason or None,
            "nvcc": str(nvcc.version) if nvcc else None,
            "nvcc_reason": self.nvcc.reason or None,
            "memory": mem.evidence() if mem else None,
        }


def probe_nvcc() -> Probed[NvccInfo]:
    candidates = [proc.find("nvcc")]
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
            return Probed(NvccInfo(version, nvcc))
    return Probed(None, "nvcc not found on PATH or under CUDA_HOME")


def probe_memory(proc_root: Path = Path("/proc")) -> Probed[MemoryFacts]:
    try:
        info = parse_meminfo((proc_root / "meminfo").read_text(encoding="utf-8"))
    except OSError as exc:
        return Probed(None, f"cannot read {proc_root / 'meminfo'}: {exc}")
    try:
        swaps = [d.name for d in parse_swaps((proc_root / "swaps").read_text(encoding="utf-8"))]
    except OSError:
        swaps = []
    limit = probe_host_resources(proc_root=proc_root).cgroup_memory_limit
    return Probed(MemoryFacts(meminfo=info, swap_devices=swaps, cgroup_memory_max=limit))


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def probe_identity() -> HostIdentity:
    pretty = "unknown"
    for line in _read("/etc/os-release").splitlines():
        if line.startswith("PRETTY_NAME="):
            pretty = line.split("=", 1)[1].strip().strip('"')
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = os.cpu_count() or 1
    return HostIdentity(
        # In a pod the hostname is the pod's; the fleet jobs pass the node name (docs/fleet.md).
        hostname=value("STACKGATE_HOSTNAME", default=socket.gethostname()),
        kernel=platform.release(),
        machine=platform.machine(),
        os_release=pretty,
        cpu_model=parse_cpuinfo(_read("/proc/cpuinfo")),
        affinity_cpus=max(1, affinity),
    )


def take_snapshot() -> HostSnapshot:
    return HostSnapshot(
        gpus=probe_gpus(), nvcc=probe_nvcc(), memory=probe_memory(), identity=probe_identity()
    )


@functools.cache
def host_snapshot() -> HostSnapshot:
    """The host as this process first saw it (GPUs and driver do not change under a process)."""
    return take_snapshot()
