"""Host fingerprint: taken from the host snapshot, and how two fingerprints differ and whether
that matters.

`probe_host()` reads stackgate.host.snapshot (probed once per process; the parsers live there).
What the snapshot cannot tell (no driver, no GPU) stays None / "unknown".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any, Literal

from stackgate.host.snapshot import HostSnapshot, host_snapshot
from stackgate.manifest import Manifest
from stackgate.manifest.values import arch_cc
from validators.core.host_facts import HostFacts
from validators.records.model import GpuInfo, HostFingerprint, Interconnect

Impact = Literal["blocks", "performance", "info"]

_GIB = 1024**3


def _gib(value: int | None) -> float | None:
    return round(value / _GIB, 1) if value is not None else None


def fingerprint_of(snap: HostSnapshot) -> HostFingerprint:
    """The fingerprint of a host snapshot (stackgate.host.snapshot): nothing probed here.

    interconnect is the snapshot's topology (stackgate.topology.classify: 'nvlink' only when
    every GPU pair is on NVLink), so a record, a build and preflight name one host alike.
    """
    inv = snap.inventory
    gpu = GpuInfo()
    interconnect: Interconnect = "unknown"
    if inv is not None:
        models = [g.name for g in inv.gpus]
        memory = [g.memory_mib for g in inv.gpus if g.memory_mib is not None]
        gpu = GpuInfo(
            model=models[0] if models else None,
            count=len(inv.gpus),
            compute_capabilities=sorted(f"{a}.{b}" for a, b in inv.ccs),
            memory_gib=round(memory[-1] / 1024, 1) if memory else None,
        )
        interconnect = snap.topology or "none"
    elif not Path("/dev/nvidia0").exists():
        interconnect = "none"
    mem = snap.memory.value
    info = mem.meminfo if mem is not None else {}
    nvcc = snap.nvcc.value
    ident = snap.identity
    return HostFingerprint(
        hostname=ident.hostname if ident else None,
        gpu=gpu,
        driver=inv.driver if inv else None,
        cuda_driver=inv.cuda_driver_version if inv else None,
        nvcc=f"{nvcc.version.major}.{nvcc.version.minor}" if nvcc else None,
        interconnect=interconnect,
        cpu_model=ident.cpu_model if ident else None,
        cpu_count=ident.affinity_cpus if ident else None,
        ram_gib=_gib(info.get("MemTotal")),
        swap_gib=_gib(info.get("SwapTotal")),
        kernel=ident.kernel if ident else None,
        source="probe",
    )


def probe_host() -> HostFingerprint:
    return fingerprint_of(host_snapshot())


def target_mismatch(host: HostFingerprint, manifest: Manifest) -> list[str]:
    """Why this host cannot prove the stack for its targets; [] when it can."""
    problems: list[str] = []
    targets = manifest.host.target_archs
    if host.gpu.count == 0:
        problems.append(f"no NVIDIA GPU on this host; the stack targets {', '.join(targets)}")
        return problems
    wanted = {f"{arch_cc(a)[0]}.{arch_cc(a)[1]}" for a in targets}
    have = set(host.gpu.compute_capabilities)
    if not have & wanted:
        problems.append(
            f"host GPUs are CC {', '.join(sorted(have)) or 'unknown'}; "
            f"the stack targets {', '.join(targets)}"
        )
    if host.driver is not None and _version_tuple(host.driver) < _version_tuple(
        manifest.host.min_driver
    ):
        problems.append(
            f"driver {host.driver} is below the stack's min_driver {manifest.host.min_driver}"
        )
    return problems


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


@dataclass(frozen=True)
class HostDifference:
    field: str
    recorded: str
    here: str
    impact: Impact
    why: str


def _show(value: object) -> str:
    return "unknown" if value is None else str(value)


# field (its attribute path), impact, why it matters
HOST_FIELDS: tuple[tuple[str, Impact, str], ...] = (
    (
        "gpu.compute_capabilities",
        "blocks",
        "other GPU arch: different kernels (cubins/PTX) run, or none do",
    ),
    ("gpu.count", "blocks", "tensor parallel size and the all-reduce path depend on the GPU count"),
    ("gpu.model", "performance", "another GPU model: benchmark numbers are not comparable"),
    (
        "interconnect",
        "performance",
        "the NCCL profile is chosen per topology; all-reduce cost differs",
    ),
    ("driver", "performance", "driver changes JIT/PTX behaviour and may change performance"),
    (
        "cuda_driver",
        "performance",
        "the CUDA version the driver supports bounds what the stack can load",
    ),
    ("nvcc", "performance", "FlashInfer/Triton JIT compile with the host nvcc"),
    ("gpu.memory_gib", "performance", "KV cache size (and so max concurrency) follows GPU memory"),
    ("cpu_model", "performance", "tokenization and scheduling run on the CPU"),
    ("cpu_count", "performance", "fewer CPUs can starve the scheduler and tokenizer processes"),
    ("ram_gib", "performance", "weights are staged through host RAM while loading"),
    ("swap_gib", "info", "swap changes how memory pressure fails (OOM kill vs slowdown)"),
    ("kernel", "info", "kernel build"),
    ("hostname", "info", "another machine"),
)


def diff_hosts(recorded: HostFingerprint, here: HostFingerprint) -> list[HostDifference]:
    """Every field that differs, with whether it blocks a faithful reproduction.

    blocks: the stack may not run or its kernels differ (GPU arch, GPU count for TP).
    performance: numbers are not comparable (GPU model, interconnect, driver, CPU, RAM).
    info: worth knowing, changes neither (hostname, kernel build, swap when both have none).
    A field one side could not tell is not known to differ: info, and said so.
    """
    out: list[HostDifference] = []
    for field, impact, why in HOST_FIELDS:
        a, b = attrgetter(field)(recorded), attrgetter(field)(here)
        if a == b:
            continue
        if a is None or b is None:
            impact, why = "info", f"unknown on one side; {why}"
        out.append(HostDifference(field, _show(a), _show(b), impact, why))
    return out


def parse_host_evidence(host: HostFacts) -> dict[str, Any]:
    """Fingerprint fields from a run report's host block (validators/core/host_facts.py).

    Only what the host group measured: GPUs, driver, interconnect, nvcc, memory. Pure.
    """
    out: dict[str, Any] = {}
    if host.gpus is not None:
        gpus = host.gpus
        out["gpu"] = GpuInfo(
            model=gpus.models[0] if gpus.models else None,
            count=gpus.count,
            compute_capabilities=sorted({f"{major}.{minor}" for major, minor in gpus.ccs}),
        )
    if host.driver is not None:
        if host.driver.driver is not None:
            out["driver"] = host.driver.driver
        if host.driver.driver_cuda is not None:
            out["cuda_driver"] = host.driver.driver_cuda
    if host.interconnect is not None and host.interconnect.detected is not None:
        out["interconnect"] = host.interconnect.detected
    if host.nvcc is not None and host.nvcc.nvcc is not None:
        # preflight writes the full version (13.0.88); a fingerprint keeps major.minor
        out["nvcc"] = ".".join(host.nvcc.nvcc.split(".")[:2])
    if host.memory is not None:
        for value, name in ((host.memory.MemTotal, "ram_gib"), (host.memory.SwapTotal, "swap_gib")):
            if value is not None:
                out[name] = round(value / _GIB, 1)
    return out


def fingerprint_for_run(host: HostFacts, local: HostFingerprint) -> HostFingerprint:
    """The host a run report was made on.

    A `fingerprint` block wins; else the host group's evidence, completed with this machine's
    probe only when this machine has the same GPUs and driver (so it is that host, or its twin);
    else the local probe (no host group ran: mark-good/gate run where the validation ran).
    """
    if host.fingerprint is not None:
        try:
            return HostFingerprint.model_validate({**host.fingerprint, "source": "run report"})
        except ValueError:
            pass
    measured = parse_host_evidence(host)
    if "gpu" not in measured and "driver" not in measured:
        return local
    same = (
        measured.get("gpu", local.gpu) == local.gpu
        and measured.get("driver", local.driver) == local.driver
    )
    if same:
        return local.model_copy(update={**measured, "source": "run report + local probe"})
    return HostFingerprint(**measured, source="run report (CPU, kernel, hostname unknown)")
