"""What this process may really use, as probed by stackgate.host.resources: the model alone,
so the build record can keep it while the host probes, which read the loose modules of this
package, stay above them (no import circle between the package and its subpackage).
"""

from __future__ import annotations

import math

from pydantic import Field

from stackgate.model import StrictModel

GIB = 1024**3


class HostResources(StrictModel):
    """CPU and memory limits that apply to the probing process. Byte counts, not GiB."""

    affinity_cpus: int = Field(ge=1, description="len(os.sched_getaffinity(0)).")
    cpu_quota: float | None = Field(
        default=None, description="cgroup CPU quota in cores (cpu.max / cfs quota); None: none."
    )
    mem_available: int = Field(ge=0, description="MemAvailable from /proc/meminfo.")
    mem_total: int = Field(ge=0, description="MemTotal from /proc/meminfo.")
    cgroup_memory_limit: int | None = Field(
        default=None, description="Lowest cgroup memory limit on the path to the root."
    )
    cgroup_memory_used: int | None = Field(
        default=None,
        description="The cgroup's usage minus inactive file cache (what cannot be reclaimed).",
    )
    swap_total: int = Field(default=0, ge=0, description="Sum of /proc/swaps sizes.")
    cgroup_version: str = Field(default="none", description="'v1', 'v2', 'hybrid' or 'none'.")

    @property
    def usable_cpus(self) -> int:
        cpus = self.affinity_cpus
        if self.cpu_quota is not None:
            cpus = min(cpus, max(1, math.floor(self.cpu_quota)))
        return max(1, cpus)

    @property
    def usable_memory(self) -> int:
        """Memory a new build may take: MemAvailable, capped by the cgroup's headroom."""
        usable = self.mem_available
        if self.cgroup_memory_limit is not None:
            headroom = self.cgroup_memory_limit - (self.cgroup_memory_used or 0)
            usable = min(usable, max(0, headroom))
        return usable
