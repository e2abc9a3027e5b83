"""Report.host typed (issue 28 §1): the host group's evidence as validators/preflight/
host_facts.HostFacts. Every committed run report loads and writes back the same JSON; the host
group's own output goes through it into the fingerprint; a field of the wrong type is refused
naming the field (it used to be skipped, and the record's host silently lost it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from stackgate.host.gpus import Gpu, GpuInventory, Probed
from stackgate.host.parsers import parse_meminfo, parse_nvcc_version
from stackgate.host.snapshot import HostIdentity, HostSnapshot, MemoryFacts, NvccInfo
from stackgate.manifest.loading import load_stack
from validators.core.host_facts import HostFacts
from validators.core.results import Report
from validators.preflight.group import PreflightFacts, evaluate_host
from validators.records.fingerprint import fingerprint_for_run, fingerprint_of
from validators.records.model import HostFingerprint

ROOT = Path(__file__).resolve().parents[2]


def _committed_reports() -> list[tuple[Path, dict[str, Any]]]:
    out = []
    for path in sorted((ROOT / "benchmarks").glob("*/results/**/*.json")):
        try:
            data = json.loads(path.read_text())
        except ValueError:
            continue  # JSON lines, not a report
        if isinstance(data, dict) and {"schema_version", "results", "host"} <= data.keys():
            out.append((path, data))
    return out


def test_every_committed_report_loads_and_writes_back_the_same_host_block() -> None:
    reports = _committed_reports()
    assert len(reports) >= 40  # gate_h200, h200_sglang, runtime_h200, static runs
    with_gpus = 0
    for path, data in reports:
        report = Report.model_validate(data)
        assert report.model_dump(mode="json")["host"] == data["host"], path
        assert json.loads(report.model_dump_json())["host"] == data["host"], path
        assert report.host.empty == (not data["host"]), path
        if report.host.gpus is not None:
            with_gpus += 1
            assert report.host.gpus.count == data["host"]["host.gpus"]["count"]
    assert with_gpus >= 30


def _snapshot(gpus: int, links: dict[str, str]) -> HostSnapshot:
    inv = GpuInventory(
        gpus=[Gpu(index=i, name="NVIDIA H200", cc=(9, 0), memory_mib=143771) for i in range(gpus)],
        driver="580.95.05",
        cuda_driver_version="13.0",
        links=links,
        source="nvidia-smi",
    )
    nvcc = parse_nvcc_version("Cuda compilation tools, release 12.9, V12.9.86")
    assert nvcc is not None
    meminfo = "MemTotal:       24683652 kB\nMemAvailable:   13238076 kB\nSwapTotal: 0 kB\n"
    return HostSnapshot(
        gpus=Probed(inv),
        nvcc=Probed(NvccInfo(nvcc, "/usr/local/cuda/bin/nvcc")),
        memory=Probed(MemoryFacts(meminfo=parse_meminfo(meminfo))),
        identity=HostIdentity(
            hostname="h", kernel="6.1", machine="x86_64", os_release="Debian", affinity_cpus=2
        ),
    )


@pytest.mark.parametrize(("gpus", "link"), [(1, None), (2, "NVLINK"), (4, "PCIE")])
def test_the_host_groups_output_is_the_fingerprint_of_its_snapshot(
    gpus: int, link: str | None
) -> None:
    links = {f"{i}-{j}": link for i in range(gpus) for j in range(i + 1, gpus) if link}
    snap = _snapshot(gpus, links)
    facts = PreflightFacts(host=snap, disk=Probed({"path": "/", "free": 1 << 40, "total": 1 << 41}))
    results = evaluate_host(load_stack("h200-sglang").manifest, facts)
    report = Report(
        stack="h200-sglang",
        started_at="2026-12-01T00:00:00+00:00",
        host=HostFacts.of_evidence({r.check: r.evidence for r in results}),
        results=results,
    )
    again = Report.model_validate_json(report.model_dump_json())
    assert again.host == report.host
    # another machine reads the report: only what the host group measured, nothing of its own
    far = fingerprint_for_run(again.host, HostFingerprint(hostname="collector"))
    probed = fingerprint_of(snap)
    assert far.gpu.model == probed.gpu.model and far.gpu.count == gpus
    assert far.gpu.compute_capabilities == probed.gpu.compute_capabilities == ["9.0"]
    assert (far.driver, far.cuda_driver, far.nvcc) == ("580.95.05", "13.0", "12.9")
    assert far.ram_gib == probed.ram_gib and far.swap_gib == 0.0
    assert far.interconnect == (probed.interconnect if gpus > 1 else "unknown")
    assert far.hostname is None


GOOD: dict[str, Any] = {
    "host.gpus": {"count": 8, "models": ["NVIDIA H200"], "ccs": [[9, 0]]},
    "host.driver": {"driver": "580.95.05", "driver_cuda": "13.0"},
    "host.interconnect": {"detected": "nvlink"},
    "host.nvcc": {"nvcc": "12.9.86"},
    "host.memory": {"MemTotal": 1 << 40, "SwapTotal": 0},
}


@pytest.mark.parametrize(
    ("check", "field", "value"),
    [
        ("host.gpus", "count", "8"),
        ("host.gpus", "count", -1),
        ("host.gpus", "ccs", [[9]]),
        ("host.gpus", "ccs", "9.0"),
        ("host.driver", "driver", 580),
        ("host.interconnect", "detected", "ethernet"),
        ("host.nvcc", "nvcc", ["12.9"]),
        ("host.memory", "MemTotal", -5),
        ("host.memory", "SwapTotal", "0 kB"),
    ],
)
def test_a_wrong_type_is_refused_naming_the_field(check: str, field: str, value: Any) -> None:
    bad = {**GOOD, check: {**GOOD[check], field: value}}
    with pytest.raises(ValidationError) as caught:
        HostFacts.model_validate(bad)
    assert check in str(caught.value) and field in str(caught.value)
    assert HostFacts.model_validate(GOOD).gpus is not None  # the good block passes


def test_evidence_beside_the_typed_fields_is_kept_as_written() -> None:
    block = {
        **GOOD,
        "host.gpus": {**GOOD["host.gpus"], "accepted": "why", "targets": ["9.0a"]},
        "host.rule.some-rule": {"evidence": {"x": 1}},
        "host.p2p": {"failures": ["0-1"]},
    }
    facts = HostFacts.model_validate(block)
    assert facts.model_dump(mode="json") == block
    assert HostFacts().empty and not facts.empty
