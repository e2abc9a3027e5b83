"""The host group: driver, GPUs and their archs, interconnect vs the env's profile, P2P,
memory/swap/disk, nvcc vs the target archs, and the host rules of stacks/rules.toml."""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from stackgate.manifest import Manifest, Topology, arch_cc
from stackgate.rules import HostFacts, StackFacts, evaluate, load_rules
from stackgate.topology import classify
from validators.context import BUILD_RECORD_RELPATH, RunContext
from validators.preflight.parsers import GpuInventory
from validators.preflight.probes import (
    Probed,
    nvcc_version,
    probe_disk,
    probe_gpus,
    probe_memory,
    probe_nvcc,
)
from validators.results import Result, Status, make_result

GROUP = "host"
GIB = 1 << 30
MIN_FREE_DISK = 10 * GIB
# NVIDIA release notes: the lowest Linux driver for each CUDA major.minor the stacks use.
DRIVER_FOR_CUDA = {(13, 0): Version("580"), (12, 9): Version("575.51"), (12, 8): Version("570.26")}


@dataclass(frozen=True)
class HostSnapshot:
    """Everything preflight learned; `as_dict()` goes into the Report's `host`."""

    gpus: Probed
    nvcc: Probed
    memory: Probed
    disk: Probed

    def inventory(self) -> GpuInventory | None:
        value = self.gpus.value
        return value if isinstance(value, GpuInventory) else None

    def facts(self) -> HostFacts:
        inv = self.inventory()
        driver: Version | None = None
        if inv is not None and inv.driver:
            try:
                driver = Version(inv.driver)
            except InvalidVersion:
                driver = None
        return HostFacts(
            driver=driver, nvcc=nvcc_version(self.nvcc), gpu_ccs=inv.ccs if inv else ()
        )

    def as_dict(self) -> dict[str, Any]:
        inv = self.inventory()
        nvcc = self.nvcc.value
        return {
            "gpus": inv.model_dump(mode="json") if inv else None,
            "gpus_reason": self.gpus.reason or None,
            "nvcc": str(nvcc[0]) if nvcc else None,
            "nvcc_reason": self.nvcc.reason or None,
            "memory": self.memory.value,
            "disk": self.disk.value,
        }


def snapshot(disk_path: Path) -> HostSnapshot:
    return HostSnapshot(
        gpus=probe_gpus(), nvcc=probe_nvcc(), memory=probe_memory(), disk=probe_disk(disk_path)
    )


def run_group(ctx: RunContext) -> list[Result]:
    snap = snapshot(ctx.env_path or Path.cwd())
    return evaluate_host(ctx.stack.manifest, snap, env_path=ctx.env_path, topology=ctx.topology)


_r = functools.partial(make_result, group=GROUP)


def detected_topology(inv: GpuInventory | None) -> Topology | None:
    return None if inv is None else classify(len(inv.gpus), inv.links)


def evaluate_host(
    manifest: Manifest,
    snap: HostSnapshot,
    *,
    env_path: Path | None = None,
    topology: Topology | None = None,
) -> list[Result]:
    """Pure given the snapshot: the tests feed it snapshots parsed from recorded outputs."""
    t = time.perf_counter()
    inv = snap.inventory()
    out: list[Result] = [_driver(manifest, inv, snap.gpus.reason)]
    out.append(_gpus(manifest, inv, snap.gpus.reason))
    out.append(_interconnect(manifest, inv, env_path, topology))
    out.append(_p2p(inv))
    out.extend(_memory_disk(snap))
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


def _recorded_topology(env_path: Path | None) -> str | None:
    if env_path is None:
        return None
    try:
        record = json.loads((env_path / BUILD_RECORD_RELPATH).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = record.get("topology") if isinstance(record, dict) else None
    return value if isinstance(value, str) else None


def _interconnect(
    manifest: Manifest, inv: GpuInventory | None, env_path: Path | None, topology: Topology | None
) -> Result:
    if inv is None or len(inv.gpus) < 2:
        return _r("host.interconnect", "SKIP", "fewer than 2 GPUs: no interconnect to judge")
    detected = detected_topology(inv)
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


def _memory_disk(snap: HostSnapshot) -> list[Result]:
    out: list[Result] = []
    mem = snap.memory.value
    if mem is None:
        out.append(_r("host.memory", "ERROR", snap.memory.reason))
    else:
        total, avail = mem.get("MemTotal", 0), mem.get("MemAvailable", 0)
        swap = mem.get("SwapTotal", 0)
        limit = mem.get("cgroup_memory_max")
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
                mem,
            )
        )
    disk = snap.disk.value
    if disk is None:
        out.append(_r("host.disk", "ERROR", snap.disk.reason))
    else:
        free = disk["free"]
        status: Status = "FAIL" if free < MIN_FREE_DISK else "PASS"
        out.append(
            _r(
                "host.disk",
                status,
                f"{free / GIB:.1f} GiB free at {disk['path']}"
                + (f" (< {MIN_FREE_DISK / GIB:.0f} GiB)" if status == "FAIL" else ""),
                disk,
            )
        )
    return out


def _nvcc(manifest: Manifest, snap: HostSnapshot) -> Result:
    version = nvcc_version(snap.nvcc)
    need = Version(manifest.host.min_nvcc_for_jit) if manifest.host.min_nvcc_for_jit else None
    sm12 = [t for t in manifest.host.target_archs if arch_cc(t)[0] == 12]
    if sm12:
        need = max(need or Version("12.9"), Version("12.9"))
    if version is None:
        if need is None:
            return _r("host.nvcc", "SKIP", f"{snap.nvcc.reason}; the stack needs no JIT compiler")
        return _r(
            "host.nvcc",
            "FAIL",
            f"{snap.nvcc.reason}: FlashInfer JIT needs nvcc >= {need} for "
            f"{', '.join(manifest.host.target_archs)}",
        )
    ev = {"nvcc": str(version), "path": snap.nvcc.value[1], "needed": str(need) if need else None}
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
    facts = StackFacts.from_manifest(manifest, host=snap.facts())
    findings = evaluate(load_rules(), facts, scope="host")
    out: list[Result] = []
    for f in findings:
        status: Status = "FAIL" if f.severity == "error" else "PASS"
        reason = f.message if f.severity == "error" else f"warning: {f.message}"
        if f.remedy:
            reason += f" -- remedy: {f.remedy}"
        out.append(_r(f"host.rule.{f.rule}", status, reason, {"evidence": f.evidence}))
    if not out:
        out.append(_r("host.rules", "PASS", "no host rule fires"))
    return out
