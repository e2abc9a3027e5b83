"""The host group: driver, GPUs and their archs, interconnect vs the env's profile, P2P,
memory/swap/disk, nvcc vs the target archs, and the host rules of stacks/rules.toml."""

from __future__ import annotations

import functools
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import Version

from stackgate.build_record import read_build_record
from stackgate.errors import BadInput
from stackgate.host.gpus import GpuInventory, Probed
from stackgate.host.snapshot import HostSnapshot, host_snapshot
from stackgate.manifest import Manifest
from stackgate.manifest.rules import StackFacts, default_rules_path, evaluate, load_rules
from stackgate.manifest.values import arch_cc
from stackgate.topology import Topology
from validators.core.checks import HOST_RULE, family_id
from validators.core.context import RunContext
from validators.core.results import Result, Status, make_result

GROUP = "host"
GIB = 1 << 30
MIN_FREE_DISK = 10 * GIB
# NVIDIA release notes: the lowest Linux driver for each CUDA major.minor the stacks use.
DRIVER_FOR_CUDA = {(13, 0): Version("580"), (12, 9): Version("575.51"), (12, 8): Version("570.26")}


def probe_disk(path: Path) -> Probed[dict[str, Any]]:
    probe_at = path
    while not probe_at.exists() and probe_at != probe_at.parent:
        probe_at = probe_at.parent
    try:
        usage = shutil.disk_usage(probe_at)
    except OSError as exc:
        return Probed(None, f"cannot stat {probe_at}: {exc}")
    return Probed({"path": str(probe_at), "free": usage.free, "total": usage.total})


@dataclass(frozen=True)
class PreflightFacts:
    """The host snapshot plus the free disk where the env lives; `as_dict()` goes into the
    Report's `host`."""

    host: HostSnapshot
    disk: Probed[dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        return {**self.host.as_dict(), "disk": self.disk.value}


def gather(disk_path: Path) -> PreflightFacts:
    return PreflightFacts(host=host_snapshot(), disk=probe_disk(disk_path))


def needs_disk(env_path: Path | None) -> bool:
    """Free disk matters where something will be written: building an env (none given, or
    none built there yet). Checking an env that is already built writes nothing big."""
    return env_path is None or not (env_path / "bin" / "python").exists()


def run_group(ctx: RunContext) -> list[Result]:
    facts = gather(ctx.env_path or Path.cwd())
    return evaluate_host(ctx.stack.manifest, facts, env_path=ctx.env_path, topology=ctx.topology)


_r = functools.partial(make_result, group=GROUP)


def evaluate_host(
    manifest: Manifest,
    facts: PreflightFacts,
    *,
    env_path: Path | None = None,
    topology: Topology | None = None,
) -> list[Result]:
    """Pure given the snapshot: the tests feed it snapshots parsed from recorded outputs."""
    t = time.perf_counter()
    snap = facts.host
    inv = snap.inventory
    out: list[Result] = [_driver(manifest, inv, snap.gpus.reason)]
    out.append(_gpus(manifest, inv, snap.gpus.reason))
    out.append(_interconnect(manifest, snap, env_path, topology))
    out.append(_p2p(inv))
    out.extend(_memory_disk(facts, needs_disk(env_path)))
    out.append(_nvcc(manifest, snap))
    out.extend(_rules(manifest, snap))
    seconds = round(time.perf_counter() - t, 4)
    return [r.model_copy(update={"duration_s": seconds}) for r in out]


def _driver(manifest: Manifest, inv: GpuInventory | None, why: str) -> Result:
    if inv is None or not inv.driver:
        return _r("host.driver", "SKIP", f"no NVIDIA driver on this host: {why}")
    have = Version(inv.driver)
    need = Version(manifest.host.min_driver)
    cuda = Version(manifest.host.cuda)
    cuda_need = DRIVER_FOR_CUDA.get((cuda.major, cuda.minor))
    ev = {
        "driver": inv.driver,
        "min_driver": str(need),
        "cuda": str(cuda),
        "driver_cuda": inv.cuda_driver_version,
    }
    if have < need:
        return _r(
            "host.driver", "FAIL", f"driver {have} is older than the stack's min_driver {need}", ev
        )
    if cuda_need is not None and have < cuda_need:
        return _r(
            "host.driver",
            "FAIL",
            f"driver {have} cannot run CUDA {cuda} (needs >= {cuda_need})",
            ev,
        )
    return _r("host.driver", "PASS", f"driver {have} >= {need}, runs CUDA {cuda}", ev)


def _target_ok(cc: tuple[int, int], target: str) -> bool:
    major, minor, suffix = arch_cc(target)
    if suffix == "a":
        return cc == (major, minor)
    return cc[0] == major and cc[1] >= minor


def _gpus(manifest: Manifest, inv: GpuInventory | None, why: str) -> Result:
    if inv is None:
        return _r("host.gpus", "SKIP", f"no GPU visible (CPU-only host): {why}")
    if not inv.gpus:
        return _r("host.gpus", "SKIP", "the NVIDIA driver reports no GPU")
    models = sorted({g.name for g in inv.gpus})
    ccs = ", ".join(f"{a}.{b}" for a, b in inv.ccs)
    ev = {
        "count": len(inv.gpus),
        "models": models,
        "ccs": [list(c) for c in inv.ccs],
        "targets": manifest.host.target_archs,
    }
    matching = [t for t in manifest.host.target_archs if any(_target_ok(cc, t) for cc in inv.ccs)]
    summary = f"{len(inv.gpus)} x {', '.join(models)} (CC {ccs})"
    if not matching:
        return _r(
            "host.gpus",
            "SKIP",
            f"{summary}: host is SM{''.join(map(str, inv.ccs[0]))}, stack targets "
            f"{', '.join(manifest.host.target_archs)}; arch-specific checks do not apply here",
            ev,
        )
    return _r("host.gpus", "PASS", f"{summary} matches target {', '.join(matching)}", ev)


def _recorded_topology(env_path: Path | None) -> Topology | None:
    if env_path is None:
        return None
    try:
        return read_build_record(env_path).topology
    except BadInput:
        return None


def _interconnect(
    manifest: Manifest, snap: HostSnapshot, env_path: Path | None, topology: Topology | None
) -> Result:
    inv = snap.inventory
    if inv is None or len(inv.gpus) < 2:
        return _r("host.interconnect", "SKIP", "fewer than 2 GPUs: no interconnect to judge")
    detected = snap.topology
    applied = topology or _recorded_topology(env_path)
    ev = {
        "links": inv.links,
        "nvlink_pairs": inv.nvlink_pairs(),
        "detected": detected,
        "env_profile": applied,
        "profile_env": manifest.env_for(detected) if detected else {},
    }
    kind = "every GPU pair on NVLink" if detected == "nvlink" else "PCIe only (no full NVLink)"
    if applied is not None and applied != detected:
        return _r(
            "host.interconnect",
            "FAIL",
            f"{kind}, but the environment carries the '{applied}' profile: rebuild or run with "
            f"--topology {detected} (the PCIe NCCL settings made a 64 MB all-reduce 3x slower "
            "on NVLink)",
            ev,
        )
    return _r("host.interconnect", "PASS", f"{kind}: the stack's '{detected}' profile applies", ev)


def _p2p(inv: GpuInventory | None) -> Result:
    if inv is None or len(inv.gpus) < 2:
        return _r("host.p2p", "SKIP", "fewer than 2 GPUs: no peer-to-peer to check")
    if inv.source != "nvml":
        return _r("host.p2p", "SKIP", "P2P status needs NVML (nvidia-ml-py could not load it)")
    if inv.p2p_error:
        return _r("host.p2p", "SKIP", f"P2P status unknown: {inv.p2p_error}")
    if inv.p2p_failures:
        return _r(
            "host.p2p",
            "FAIL",
            f"P2P not available between {len(inv.p2p_failures)} GPU pairs: "
            f"{'; '.join(inv.p2p_failures[:4])} -- on PCIe hosts this is usually the IOMMU "
            "(boot with iommu=pt) or PCIe ACS on the switches (disable ACS); SGLang then "
            "disables custom all-reduce",
            {"failures": inv.p2p_failures},
        )
    return _r("host.p2p", "PASS", "P2P read works between every GPU pair (NVML)")


def _memory_disk(facts: PreflightFacts, disk_needed: bool) -> list[Result]:
    out: list[Result] = []
    memory = facts.host.memory
    if memory.value is None:
        out.append(_r("host.memory", "ERROR", memory.reason))
    else:
        info = memory.value.meminfo
        total, avail = info.get("MemTotal", 0), info.get("MemAvailable", 0)
        swap = info.get("SwapTotal", 0)
        limit = memory.value.cgroup_memory_max
        note = (
            "no swap: compile jobs must be planned to memory (the builder does)"
            if not swap
            else f"swap {swap / GIB:.1f} GiB"
        )
        lim = f", cgroup limit {limit / GIB:.1f} GiB" if limit else ""
        out.append(
            _r(
                "host.memory",
                "PASS",
                f"{total / GIB:.1f} GiB RAM, {avail / GIB:.1f} GiB available{lim}; {note}",
                memory.value.evidence(),
            )
        )
    disk = facts.disk.value
    if disk is None:
        out.append(_r("host.disk", "ERROR", facts.disk.reason))
    else:
        free = disk["free"]
        low = free < MIN_FREE_DISK
        status: Status = "FAIL" if low and disk_needed else "PASS"
        note = ""
        if low:
            note = (
                f" (< {MIN_FREE_DISK / GIB:.0f} GiB, needed to build an env)"
                if disk_needed
                else f" (< {MIN_FREE_DISK / GIB:.0f} GiB: not needed, the env is already built)"
            )
        out.append(
            _r(
                "host.disk",
                status,
                f"{free / GIB:.1f} GiB free at {disk['path']}{note}",
                {**disk, "needed": disk_needed},
            )
        )
    return out


def _nvcc(manifest: Manifest, snap: HostSnapshot) -> Result:
    nvcc = snap.nvcc.value
    version = nvcc.version if nvcc else None
    need = Version(manifest.host.min_nvcc_for_jit) if manifest.host.min_nvcc_for_jit else None
    sm12 = [t for t in manifest.host.target_archs if arch_cc(t)[0] == 12]
    if sm12:
        need = max(need or Version("12.9"), Version("12.9"))
    if nvcc is None or version is None:
        if need is None:
            return _r("host.nvcc", "SKIP", f"{snap.nvcc.reason}; the stack needs no JIT compiler")
        return _r(
            "host.nvcc",
            "FAIL",
            f"{snap.nvcc.reason}: FlashInfer JIT needs nvcc >= {need} for "
            f"{', '.join(manifest.host.target_archs)}",
        )
    ev = {"nvcc": str(version), "path": nvcc.path, "needed": str(need) if need else None}
    if need is not None and version < need:
        return _r(
            "host.nvcc",
            "FAIL",
            f"nvcc {version} cannot JIT for {', '.join(sm12 or manifest.host.target_archs)} "
            f"(needs >= {need}); FlashInfer then says 'No supported CUDA architectures found'",
            ev,
        )
    return _r("host.nvcc", "PASS", f"nvcc {version}" + (f" >= {need}" if need else ""), ev)


def _rules(manifest: Manifest, snap: HostSnapshot) -> list[Result]:
    facts = StackFacts.from_manifest(manifest, host=snap.rule_facts())
    path = default_rules_path()
    try:
        rules = load_rules(path)
    except BadInput as exc:
        # The rules file, not the manifest: one ERROR naming it, the other host checks stand.
        return [_r("host.rules", "ERROR", "; ".join(exc.details[:3]) or exc.message)]
    findings = evaluate(rules, facts, scope="host")
    out: list[Result] = []
    for f in findings:
        status: Status = "FAIL" if f.severity == "error" else "PASS"
        reason = f.message if f.severity == "error" else f"warning: {f.message}"
        if f.remedy:
            reason += f" -- remedy: {f.remedy}"
        out.append(_r(family_id(HOST_RULE, f.rule), status, reason, {"evidence": f.evidence}))
    if not out:
        out.append(_r("host.rules", "PASS", "no host rule fires", {"rules": str(path)}))
    return out
