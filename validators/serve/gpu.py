"""What NVML says about the GPUs: memory in use per device and the PIDs holding contexts.

NVML is the process's one session (stackgate.host.nvml). `snapshot()` returns None where
NVML cannot be used (no driver: CPU CI, or a container without
the library); callers then say "unknown" rather than guess.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from stackgate.host.nvml import nvml as nvml_session

log = logging.getLogger("stackgate.serve.gpu")


@dataclass(frozen=True)
class GpuSnapshot:
    used_mib: list[float]  # per device index
    pids: dict[int, float]  # pid -> MiB it holds (0 when NVML does not say), all devices
    # pid -> MiB per device index (empty where the snapshot was made without it)
    per_device: list[dict[int, float]] = field(default_factory=list)

    def pids_among(self, wanted: set[int]) -> dict[int, float]:
        return {pid: mib for pid, mib in self.pids.items() if pid in wanted}

    def used_by_others_excluded(self, ours: set[int]) -> list[float]:
        """MiB in use per device minus what NVML attributes to processes not in `ours`: other
        tenants' servers starting or stopping meanwhile (several runs sharing the GPUs) then
        do not look like memory our server failed to release."""
        if not self.per_device:
            return list(self.used_mib)
        return [
            used - sum(mib for pid, mib in procs.items() if pid not in ours)
            for used, procs in zip(self.used_mib, self.per_device, strict=False)
        ]


def snapshot() -> GpuSnapshot | None:
    session = nvml_session()
    nvml = session.module
    if nvml is None:
        log.debug("%s", session.reason)
        return None
    try:
        used: list[float] = []
        pids: dict[int, float] = {}
        per_device: list[dict[int, float]] = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            used.append(nvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20)
            procs = list(nvml.nvmlDeviceGetComputeRunningProcesses(handle))
            procs += list(nvml.nvmlDeviceGetGraphicsRunningProcesses(handle))
            here: dict[int, float] = {}
            for proc in procs:
                mem = (getattr(proc, "usedGpuMemory", None) or 0) / 2**20
                here[int(proc.pid)] = here.get(int(proc.pid), 0.0) + mem
                pids[int(proc.pid)] = pids.get(int(proc.pid), 0.0) + mem
            per_device.append(here)
        return GpuSnapshot(used_mib=used, pids=pids, per_device=per_device)
    except Exception as exc:
        log.debug("NVML query failed: %s", exc)
        return None
