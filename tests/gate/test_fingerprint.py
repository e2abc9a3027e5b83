"""Host fingerprint: pure parsers on recorded outputs, target matching, host differences."""

from __future__ import annotations

from stackgate.host.gpus import Gpu, GpuInventory, Probed
from stackgate.host.parsers import parse_cpuinfo, parse_meminfo, parse_nvcc_version
from stackgate.host.snapshot import HostIdentity, HostSnapshot, MemoryFacts, NvccInfo
from stackgate.manifest.loading import load_stack
from validators.core.host_facts import HostFacts
from validators.records.fingerprint import (
    diff_hosts,
    fingerprint_for_run,
    fingerprint_of,
    parse_host_evidence,
    target_mismatch,
)
from validators.records.model import GpuInfo, HostFingerprint

# Recorded on the project's CI machine (Debian 12, 2 vCPU EPYC, no swap).
MEMINFO = """MemTotal:       24683652 kB
MemFree:         8239656 kB
MemAvailable:   13238076 kB
SwapTotal:             0 kB
SwapFree:              0 kB
"""
CPUINFO = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\nflags\t\t: fpu\n"
NVCC = "Cuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0.r13.0/compiler.36424714_0\n"

# The host group's evidence as validators/preflight writes it (Report.host), for 8 x SM120.
HOST_EVIDENCE = HostFacts.model_validate({
    "host.driver": {"driver": "590.48.01", "min_driver": "580", "cuda": "13.0.1",
                    "driver_cuda": "13.1"},
    "host.gpus": {"count": 8, "models": ["NVIDIA RTX PRO 6000 Blackwell Server Edition"],
                  "ccs": [[12, 0]], "targets": ["12.0a"]},
    "host.interconnect": {"links": {}, "nvlink_pairs": 0, "detected": "pcie"},
    "host.nvcc": {"nvcc": "13.0.88", "path": "/usr/local/cuda/bin/nvcc", "needed": "12.9"},
    "host.memory": {"MemTotal": 1099511627776, "MemAvailable": 1000000000000, "SwapTotal": 0},
})  # fmt: skip

RTX = HostFingerprint(
    hostname="gpu-1",
    gpu=GpuInfo(model="NVIDIA RTX PRO 6000 Blackwell Server Edition", count=8,
                compute_capabilities=["12.0"]),
    driver="590.48.01", cuda_driver="13.1", interconnect="pcie", cpu_model="AMD EPYC 9555",
)  # fmt: skip


def _snapshot(links: dict[str, str], count: int) -> HostSnapshot:
    """A snapshot made of recorded outputs through the shared parsers (stackgate.host)."""
    nvcc = parse_nvcc_version(NVCC)
    assert nvcc is not None
    inv = GpuInventory(
        source="nvml",
        driver="590.48.01",
        cuda_driver_version="13.1",
        gpus=[
            Gpu(index=i, name="NVIDIA B200", cc=(10, 0), memory_mib=183359) for i in range(count)
        ],
        links=links,
    )
    return HostSnapshot(
        gpus=Probed(inv),
        nvcc=Probed(NvccInfo(nvcc, "/usr/local/cuda/bin/nvcc")),
        memory=Probed(MemoryFacts(meminfo=parse_meminfo(MEMINFO))),
        identity=HostIdentity(hostname="h", kernel="6.1", machine="x86_64", os_release="Debian",
                              cpu_model=parse_cpuinfo(CPUINFO), affinity_cpus=2),
    )  # fmt: skip


def test_fingerprint_of_a_snapshot_from_recorded_outputs() -> None:
    fp = fingerprint_of(_snapshot({"0-1": "NVLINK"}, 2))
    assert (fp.ram_gib, fp.swap_gib, fp.nvcc, fp.cpu_model) == (23.5, 0.0, "13.0", "AMD EPYC")
    assert fp.gpu.compute_capabilities == ["10.0"] and fp.gpu.memory_gib == 179.1
    assert fp.interconnect == "nvlink"
    assert parse_cpuinfo("") is None


def test_nvlink_bridged_pairs_are_pcie_for_record_build_and_preflight() -> None:
    """4 GPUs with 0-1 and 2-3 bridged: some links are NVLink, the TP ring still crosses PCIe.
    The fingerprint used to say 'nvlink' (any active link) while the build said 'pcie'."""
    from builder.venv.topology import detect_topology
    from validators.preflight.group import PreflightFacts, evaluate_host

    pairs = {f"{i}-{j}": "PCIE" for i in range(4) for j in range(i + 1, 4)}
    snap = _snapshot({**pairs, "0-1": "NVLINK", "2-3": "NVLINK"}, 4)
    assert fingerprint_of(snap).interconnect == "pcie"
    assert detect_topology(snap).topology == "pcie"
    facts = PreflightFacts(host=snap, disk=Probed({"path": "/", "free": 1 << 40, "total": 1 << 41}))
    by = {r.check: r for r in evaluate_host(load_stack("cu130").manifest, facts)}
    assert by["host.interconnect"].evidence["detected"] == "pcie"


def test_target_mismatch_names_the_reason() -> None:
    cu130 = load_stack("cu130").manifest
    assert target_mismatch(RTX, cu130) == []
    assert "no NVIDIA GPU" in target_mismatch(HostFingerprint(), cu130)[0]
    h200 = RTX.model_copy(
        update={"gpu": GpuInfo(model="H200", count=2, compute_capabilities=["9.0"])}
    )
    assert "CC 9.0; the stack targets 12.0a" in target_mismatch(h200, cu130)[0]
    old = RTX.model_copy(update={"driver": "570.86.10"})
    assert target_mismatch(old, cu130) == ["driver 570.86.10 is below the stack's min_driver 580"]


def test_differences_are_classified() -> None:
    h200 = RTX.model_copy(update={
        "hostname": "gpu-2", "interconnect": "nvlink",
        "gpu": GpuInfo(model="NVIDIA H200", count=2, compute_capabilities=["9.0"]),
    })  # fmt: skip
    impact = {d.field: d.impact for d in diff_hosts(RTX, h200)}
    assert impact["gpu.compute_capabilities"] == "blocks"
    assert impact["gpu.count"] == "blocks"
    assert impact["interconnect"] == "performance"
    assert impact["hostname"] == "info"
    assert diff_hosts(RTX, RTX) == []
    unknown = {d.field: d for d in diff_hosts(RTX, RTX.model_copy(update={"cpu_model": None}))}
    assert unknown["cpu_model"].impact == "info" and unknown["cpu_model"].here == "unknown"


def test_host_evidence_of_a_run_becomes_a_fingerprint() -> None:
    fields = parse_host_evidence(HOST_EVIDENCE)
    assert fields["gpu"] == RTX.gpu
    assert (fields["driver"], fields["cuda_driver"], fields["interconnect"]) == (
        "590.48.01", "13.1", "pcie",
    )  # fmt: skip
    assert fields["ram_gib"] == 1024.0 and fields["swap_gib"] == 0.0


def test_a_run_from_another_machine_keeps_its_own_gpus() -> None:
    collector = HostFingerprint(hostname="ci-box", cpu_model="AMD EPYC", cpu_count=2)
    far = fingerprint_for_run(HOST_EVIDENCE, collector)
    assert far.gpu.count == 8 and far.hostname is None and far.cpu_model is None
    here = fingerprint_for_run(HOST_EVIDENCE, RTX)
    assert here.hostname == "gpu-1" and here.source == "run report + local probe"
    assert fingerprint_for_run(HostFacts(), collector) == collector
