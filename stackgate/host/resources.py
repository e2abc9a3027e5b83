"""What this process may really use: CPUs and memory as the kernel and its cgroups allow.

`os.cpu_count()` and MemTotal lie inside containers and cgroups (a 128-core host with a
16 GiB memory.max still OOMs at -j128), so every number here comes from the limits that
apply to *this* process: sched_getaffinity, cgroup v2 cpu.max / v1 cfs quota, MemAvailable,
cgroup v2 memory.max / v1 memory.limit_in_bytes (the lowest along the path to the root),
and /proc/swaps. Parsers are pure functions over file text (the /proc ones in
stackgate.host.parsers); `probe_host_resources` reads the
files (roots are parameters so tests can point them at recorded copies).
"""

from __future__ import annotations

import os
from pathlib import Path

from stackgate.host.parsers import parse_meminfo, parse_swaps
from stackgate.resource_limits import HostResources

# cgroup v1 writes "no limit" as a page-rounded LONG_MAX; anything this large means none.
_UNLIMITED_FLOOR = 1 << 60


def parse_cpu_max(text: str) -> float | None:
    """cgroup v2 cpu.max ('max 100000' or '200000 100000') -> cores, None when unlimited."""
    parts = text.split()
    if not parts or parts[0] == "max":
        return None
    period = int(parts[1]) if len(parts) > 1 else 100000
    return int(parts[0]) / period if period > 0 else None


def parse_cfs_quota(quota_text: str, period_text: str) -> float | None:
    """cgroup v1 cpu.cfs_quota_us / cpu.cfs_period_us -> cores, None when -1 (unlimited)."""
    quota = int(quota_text.strip())
    period = int(period_text.strip())
    if quota <= 0 or period <= 0:
        return None
    return quota / period


def parse_memory_limit(text: str) -> int | None:
    """memory.max ('max' or bytes) or v1 memory.limit_in_bytes -> bytes, None when unlimited."""
    value = text.strip()
    if not value or value == "max":
        return None
    number = int(value)
    return None if number >= _UNLIMITED_FLOOR else number


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """/proc/self/cgroup -> {controller: path}; the v2 unified entry is under key ''."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            out[""] = path
        for controller in controllers.split(","):
            if controller:
                out[controller] = path
    return out


def parse_memory_stat(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            out[parts[0]] = int(parts[1])
    return out


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None


def _ancestors(root: Path, rel: str) -> list[Path]:
    """root/rel and each parent up to root: limits are hierarchical, the lowest one binds."""
    parts = [p for p in rel.split("/") if p]
    return [root.joinpath(*parts[:i]) for i in range(len(parts), -1, -1)]


def _memory_at(
    base: Path, relpath: str, limit_file: str, usage_file: str, inactive_key: str
) -> tuple[int | None, int | None]:
    """(lowest limit on the path to the root, usage less inactive file cache) of one hierarchy."""
    limit: int | None = None
    for folder in _ancestors(base, relpath):
        found = _read(folder / limit_file)
        value = parse_memory_limit(found) if found else None
        if value is not None:
            limit = value if limit is None else min(limit, value)
    own = base.joinpath(*[p for p in relpath.split("/") if p])
    usage_text = _read(own / usage_file)
    stat = parse_memory_stat(_read(own / "memory.stat") or "")
    used = None
    if usage_text is not None:
        used = max(0, int(usage_text.strip()) - stat.get(inactive_key, 0))
    return limit, used


def _cgroup_memory(cgroup_root: Path, paths: dict[str, str]) -> tuple[int | None, int | None, str]:
    """(limit, unreclaimable usage, version) for the memory controller."""
    v1_root = cgroup_root / "memory"
    if "memory" in paths and v1_root.is_dir():
        limit, used = _memory_at(
            v1_root,
            paths["memory"],
            "memory.limit_in_bytes",
            "memory.usage_in_bytes",
            "total_inactive_file",
        )
        return limit, used, "v1"
    if "" in paths:
        # Pure v2 mounts at the root; hybrid v1 hosts mount it at unified/.
        for base in (cgroup_root, cgroup_root / "unified"):
            if (base / "cgroup.controllers").is_file():
                limit, used = _memory_at(
                    base, paths[""], "memory.max", "memory.current", "inactive_file"
                )
                return limit, used, "v2"
    return None, None, "none"


def _cpu_quota(cgroup_root: Path, paths: dict[str, str]) -> float | None:
    quotas: list[float] = []
    v1_root = cgroup_root / "cpu"
    if "cpu" in paths and v1_root.is_dir():
        for folder in _ancestors(v1_root, paths["cpu"]):
            quota = _read(folder / "cpu.cfs_quota_us")
            period = _read(folder / "cpu.cfs_period_us")
            if quota and period:
                cores = parse_cfs_quota(quota, period)
                if cores is not None:
                    quotas.append(cores)
    if "" in paths:
        for base in (cgroup_root, cgroup_root / "unified"):
            for folder in _ancestors(base, paths[""]):
                text = _read(folder / "cpu.max")
                cores = parse_cpu_max(text) if text else None
                if cores is not None:
                    quotas.append(cores)
    return min(quotas) if quotas else None


def probe_host_resources(
    *, proc_root: Path = Path("/proc"), cgroup_root: Path = Path("/sys/fs/cgroup")
) -> HostResources:
    """Read the limits that apply to this process now."""
    meminfo = parse_meminfo(_read(proc_root / "meminfo") or "")
    paths = parse_proc_cgroup(_read(proc_root / "self" / "cgroup") or "")
    limit, used, version = _cgroup_memory(cgroup_root, paths)
    if version == "v1" and (cgroup_root / "unified" / "cgroup.controllers").is_file():
        version = "hybrid"
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux: fall back to the count of all CPUs
        affinity = os.cpu_count() or 1
    return HostResources(
        affinity_cpus=max(1, affinity),
        cpu_quota=_cpu_quota(cgroup_root, paths),
        mem_available=meminfo.get("MemAvailable", meminfo.get("MemFree", 0)),
        mem_total=meminfo.get("MemTotal", 0),
        cgroup_memory_limit=limit,
        cgroup_memory_used=used,
        swap_total=sum(d.size_bytes for d in parse_swaps(_read(proc_root / "swaps") or "")),
        cgroup_version=version,
    )
