"""Host preflight: pure parsers on recorded real outputs (2x H200 lent host, this CPU-only
machine), the host verdicts from those snapshots, and the real probes on this machine."""

from __future__ import annotations

import json
from pathlib import Path

from packaging.version import Version

from stackgate.host.gpus import Gpu, GpuInventory, Probed, inventory_from_smi
from stackgate.host.parsers import (
    SwapDevice,
    parse_meminfo,
    parse_nvcc_version,
    parse_nvidia_smi_query,
    parse_swaps,
    parse_topo_matrix,
)
from stackgate.host.snapshot import HostSnapshot, MemoryFacts, NvccInfo
from stackgate.manifest.loading import load_stack
from validators.preflight.group import PreflightFacts, evaluate_host, gather

HOST = Path(__file__).parent / "fixtures" / "host"
H200 = HOST / "h200x2"


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def test_nvidia_smi_query_h200() -> None:
    inv = inventory_from_smi(parse_nvidia_smi_query(read(H200 / "nvidia-smi-query.csv")), {})
    driver, gpus = inv.driver, inv.gpus
    assert driver == "580.159.04"
    assert [(g.index, g.name, g.cc, g.memory_mib) for g in gpus] == [
        (0, "NVIDIA H200", (9, 0), 143771),
        (1, "NVIDIA H200", (9, 0), 143771),
    ]
    assert gpus[1].pci_bus_id == "00000000:00:07.0"


def test_topology_matrix_h200_nvlink() -> None:
    # the real output carries ANSI underline codes around the header
    assert parse_topo_matrix(read(H200 / "nvidia-smi-topo.txt")) == {"0-1": "NV18"}
    assert parse_topo_matrix("no GPUs here") == {}


def test_nvcc_meminfo_swaps() -> None:
    assert parse_nvcc_version(read(H200 / "nvcc-version.txt")) == Version("13.0.88")
    assert parse_nvcc_version("garbage") is None
    mem = parse_meminfo(read(H200 / "meminfo.txt"))
    assert mem["MemTotal"] > 200 * (1 << 30)
    assert mem["SwapTotal"] == 0
    assert parse_swaps(read(H200 / "swaps.txt")) == []
    assert parse_swaps("Filename Type Size Used Priority\n/swapfile file 8388604 0 -2\n") == [
        SwapDevice("/swapfile", 8388604 * 1024)
    ]


DISK: Probed[dict[str, object]] = Probed({"path": "/tmp", "free": 100 << 30, "total": 128 << 30})


def _facts(host: HostSnapshot) -> PreflightFacts:
    return PreflightFacts(host=host, disk=DISK)  # type: ignore[arg-type]


def _h200_snapshot(p2p_error: bool = False) -> HostSnapshot:
    """nvml.json: the fixed probe's NVML view; nvml-p2p-error.json: the earlier run, where
    nvidia-ml-py's tuple constant broke nvmlDeviceGetP2PStatus (links from nvidia-smi)."""
    name = "nvml-p2p-error.json" if p2p_error else "nvml.json"
    inv = GpuInventory.model_validate(json.loads(read(H200 / name))["value"])
    mem = parse_meminfo(read(H200 / "meminfo.txt"))
    nvcc = parse_nvcc_version(read(H200 / "nvcc-version.txt"))
    assert nvcc is not None
    return HostSnapshot(
        gpus=Probed(inv),
        nvcc=Probed(NvccInfo(nvcc, "/usr/local/cuda/bin/nvcc")),
        memory=Probed(MemoryFacts(meminfo=mem)),
    )


def _status(results: list) -> dict[str, str]:  # type: ignore[type-arg]
    return {r.check: r.status for r in results}


def test_recorded_nvml_inventory() -> None:
    snap = _h200_snapshot()
    inv = snap.inventory
    assert inv is not None and inv.source == "nvml"
    assert inv.links == {"0-1": "NVLINK"} and snap.topology == "nvlink"
    assert inv.ccs == ((9, 0),) and inv.driver == "580.159.04"
    old = _h200_snapshot(True)
    assert old.inventory is not None and old.inventory.links == {"0-1": "NV18"}
    assert old.topology == "nvlink"


def test_h200_host_against_the_sm120_stack() -> None:
    manifest = load_stack("cu130").manifest
    results = evaluate_host(manifest, _facts(_h200_snapshot()))
    by = {r.check: r for r in results}
    assert by["host.driver"].status == "PASS"
    assert by["host.gpus"].status == "SKIP"
    assert "host is SM90, stack targets 12.0a" in by["host.gpus"].reason
    assert by["host.interconnect"].status == "PASS"
    assert "'nvlink' profile" in by["host.interconnect"].reason
    assert by["host.p2p"].status == "PASS"
    assert by["host.nvcc"].status == "PASS"


def test_h200_recorded_p2p_error_is_a_skip_with_the_reason() -> None:
    """The lent host's nvidia-ml-py could not query P2P: recorded as such, not guessed."""
    by = {r.check: r for r in evaluate_host(load_stack("cu130").manifest, _facts(_h200_snapshot(True)))}
    assert by["host.p2p"].status == "SKIP"
    assert "tuple" in by["host.p2p"].reason


def test_pcie_profile_on_an_nvlink_host_fails(tmp_path: Path) -> None:
    by = {
        r.check: r
        for r in evaluate_host(load_stack("cu130").manifest, _facts(_h200_snapshot()), topology="pcie")
    }
    assert by["host.interconnect"].status == "FAIL"
    assert "--topology nvlink" in by["host.interconnect"].reason


def test_old_driver_and_old_nvcc_fail_with_host_rules() -> None:
    snap = _h200_snapshot()
    inv = snap.inventory
    assert inv is not None
    old = HostSnapshot(
        gpus=Probed(inv.model_copy(update={"driver": "570.86.15"})),
        nvcc=Probed(NvccInfo(Version("12.8.93"), "/usr/local/cuda-12.8/bin/nvcc")),
        memory=snap.memory,
    )
    by = {r.check: r for r in evaluate_host(load_stack("cu130").manifest, _facts(old))}
    assert by["host.driver"].status == "FAIL"
    assert by["host.nvcc"].status == "FAIL"
    assert by["host.rule.host-driver-too-old-for-cuda-13"].status == "FAIL"
    assert by["host.rule.host-nvcc-too-old-for-sm12x"].status == "FAIL"


def test_p2p_failure_gives_the_iommu_acs_hint() -> None:
    """Constructed (no such host was recorded): 2 PCIe GPUs whose P2P read is not OK."""
    inv = GpuInventory(
        source="nvml",
        driver="590.48.01",
        gpus=[Gpu(index=i, name="NVIDIA RTX PRO 6000 Blackwell", cc=(12, 0)) for i in range(2)],
        links={"0-1": "PCIE"},
        p2p_failures=["GPU0-GPU1: P2P read status 4"],
    )
    snap = _h200_snapshot()
    host = HostSnapshot(gpus=Probed(inv), nvcc=snap.nvcc, memory=snap.memory)
    by = {r.check: r for r in evaluate_host(load_stack("cu130").manifest, _facts(host))}
    assert by["host.gpus"].status == "PASS"
    assert by["host.p2p"].status == "FAIL"
    assert "IOMMU" in by["host.p2p"].reason and "ACS" in by["host.p2p"].reason
    assert by["host.interconnect"].reason.startswith("PCIe only")


def test_this_cpu_only_host_is_reported_honestly(tmp_path: Path) -> None:
    """The real probes on this machine (no driver): GPU checks SKIP with why, no traceback."""
    facts = gather(tmp_path)
    by = {r.check: r for r in evaluate_host(load_stack("cu130").manifest, facts)}
    if facts.host.inventory is None:
        assert by["host.driver"].status == "SKIP"
        assert "no NVIDIA driver" in by["host.driver"].reason
        assert by["host.gpus"].status == "SKIP"
        assert "CPU-only" in by["host.gpus"].reason
    assert by["host.memory"].status == "PASS"
    assert by["host.disk"].status in ("PASS", "FAIL")
