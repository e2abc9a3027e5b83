"""The runtime probes (validators/runtime/probes/) run for real on NVIDIA GPUs.

Marked `gpu`: skipped, with the reason, where no driver is present (CI has none). Run them on
a GPU machine whenever the probes change (step 4 of benchmarks/gate_h200/gate_h200.sh does it on the
lent H200s; the output of its last run is in benchmarks/runtime_h200/results/probes_gpu/).

The interpreter under test is STACKGATE_GPU_PYTHON (an environment with torch), else the
one running pytest. The probes get the same environment as in `validators run`: multicast off,
PYTHONPATH dropped.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from stackgate.manifest.loading import load_stack
from validators.core.context import RunContext
from validators.core.options import parse_options
from validators.runtime import nccl_latency as nl
from validators.runtime.distributed import distributed_checks
from validators.runtime.runner import (
    SAFETY_ENV,
    ProbeOutcome,
    probe_env,
    run_distributed,
    run_probe,
)

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(900)]

PYTHON = Path(os.environ.get("STACKGATE_GPU_PYTHON", sys.executable))


@pytest.fixture(scope="module")
def torch_probe() -> ProbeOutcome:
    o = run_probe(PYTHON, "torch", env=probe_env(), timeout=300)
    assert o.status == "PASS", (
        f"torch probe with {PYTHON}: {o.reason} (set STACKGATE_GPU_PYTHON to an env with torch)"
    )
    return o


def _gpus(torch_probe: ProbeOutcome) -> int:
    return len(torch_probe.evidence.get("devices") or [])


def test_torch_probe_sees_every_gpu_and_computes_on_it(torch_probe: ProbeOutcome) -> None:
    ev = torch_probe.evidence
    assert ev["devices"], ev
    for dev in ev["devices"]:
        assert len(dev["cc"]) == 2 and dev["cc"][0] >= 7, dev
    assert ev["cuda"], "a CUDA build of torch reports torch.version.cuda"


def test_nccl_probe_all_reduces_correctly_on_two_gpus(
    torch_probe: ProbeOutcome, tmp_path: Path
) -> None:
    if _gpus(torch_probe) < 2:
        pytest.skip(f"{_gpus(torch_probe)} GPU: an all-reduce needs 2")
    sizes = [nl.KIMI_K25_HIDDEN * nl.BF16_BYTES, 64 << 20]
    o = run_distributed(
        PYTHON,
        ["nccl", ",".join(map(str, sizes)), "30"],
        world_size=2,
        env=probe_env(),
        timeout=300,
        log_dir=tmp_path,
    )
    assert o.status == "PASS", o.reason
    ev = o.evidence
    assert ev["backend"] == "nccl" and ev["world_size"] == 2 and ev["nccl"]
    assert ev["nccl_env"]["NCCL_NVLS_ENABLE"] == SAFETY_ENV["NCCL_NVLS_ENABLE"]
    stats = nl.summarize(nl.merge([ev]))
    assert [s.bytes for s in stats] == sizes
    # CUDA-event timing: positive, and 64 MB takes longer than 14 KB on any interconnect.
    assert all(s.correct and s.p50_us > 0 for s in stats)
    assert stats[1].p50_us > stats[0].p50_us


def test_symm_mem_rendezvous_and_peer_read_with_multicast_off(
    torch_probe: ProbeOutcome, tmp_path: Path
) -> None:
    if _gpus(torch_probe) < 2:
        pytest.skip(f"{_gpus(torch_probe)} GPU: symmetric memory needs 2")
    o = run_distributed(
        PYTHON, ["symm_mem"], world_size=2, env=probe_env(), timeout=300, log_dir=tmp_path
    )
    assert o.status == "PASS", o.reason
    ev = o.evidence
    assert ev["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
    assert ev["ok"] is True, ev.get("error")
    assert ev["peer_read_ok"] is True and ev["multicast_ptr_nonzero"] is False


def test_distributed_checks_at_the_profiles_tp_need_its_gpus(
    torch_probe: ProbeOutcome, tmp_path: Path
) -> None:
    """cu130's profile is TP 8: with fewer GPUs the checks SKIP saying so; `ranks=<gpus>`
    runs them at this host's count and every result says that it did."""
    gpus = _gpus(torch_probe)
    loaded = load_stack("cu130")
    env = probe_env(loaded.manifest.env_for("pcie"))
    ctx = RunContext(stack=loaded, out_dir=tmp_path)
    full = distributed_checks(
        ctx, PYTHON, env, loaded.manifest.env_for("pcie"), "pcie", gpus, torch_probe
    )
    if gpus >= 8:
        assert all(r.status == "PASS" for r in full), [r.reason for r in full]
        return
    assert [r.status for r in full] == ["SKIP", "SKIP"]
    assert f"this host has {gpus}" in full[0].reason
    if gpus < 2:
        return
    opts = parse_options([f"ranks={gpus}", "nccl_iters=20", "nccl_repeats=1"])
    fewer = distributed_checks(
        RunContext(stack=loaded, out_dir=tmp_path, options=opts),
        PYTHON,
        env,
        loaded.manifest.env_for("pcie"),
        "pcie",
        gpus,
        torch_probe,
    )
    by = {r.check: r for r in fewer}
    assert by["runtime.symm_mem"].status == "PASS", by["runtime.symm_mem"].reason
    nccl = by["runtime.nccl_latency"]
    assert nccl.status == "PASS", nccl.reason
    assert nccl.evidence["world_size"] == gpus and nccl.evidence["profile_tp"] == 8
    assert f"[{gpus} ranks by --option ranks={gpus}; the serving profile runs TP 8]" in nccl.reason
