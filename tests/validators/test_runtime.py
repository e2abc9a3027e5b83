"""Runtime group pieces that need no GPU: SGLang 0.5.9's decisions, the FlashInfer error
explanation on the real message, NCCL statistics, and the probe runner with real processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from stackgate.manifest.loading import load_stack
from validators.core.context import RunContext
from validators.runtime import nccl_latency as nl
from validators.runtime import sglang_rules as sr
from validators.runtime.group import run_group
from validators.runtime.runner import SAFETY_ENV, probe_env, run_distributed, run_probe

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "runtime_h200" / "results"
# Verbatim from FlashInfer 0.6.4 on the lent H200 (benchmarks/runtime_h200/results/runtime.json)
# and, identically, on this CPU machine with FLASHINFER_CUDA_ARCH_LIST=12.0a.
NO_ARCH = "RuntimeError: No supported CUDA architectures found for major versions [9, 10]."


def test_torch_symm_mem_keyerror_12() -> None:
    d = sr.torch_symm_mem(12, 8)
    assert not d.enabled
    assert d.reason.startswith("KeyError: 12")
    assert "--enable-torch-symm-mem" in d.reason
    assert sr.torch_symm_mem(9, 8).enabled
    assert not sr.torch_symm_mem(10, 3).enabled
    assert "quietly" in sr.torch_symm_mem(8, 2).reason


@pytest.mark.parametrize(
    ("world", "nvlink", "enabled"),
    [
        (1, False, False),
        (2, False, True),
        (4, False, False),
        (4, True, True),
        (6, True, True),
        (8, False, False),
        (3, True, False),
        (16, True, False),
    ],
)
def test_custom_all_reduce_as_sglang_decides(world: int, nvlink: bool, enabled: bool) -> None:
    assert sr.custom_all_reduce(world, nvlink).enabled is enabled


def test_custom_all_reduce_pcie_reason() -> None:
    assert "more than two PCIe-only GPUs" in sr.custom_all_reduce(8, False).reason


def test_flashinfer_fusion_gate() -> None:
    assert sr.flashinfer_fusion(9, Version("0.6.4")).enabled
    assert sr.flashinfer_fusion(10, None).enabled
    sm120 = sr.flashinfer_fusion(12, Version("0.6.4"))
    assert not sm120.enabled
    assert "0.6.17" in sm120.reason
    assert "0.6.17" not in sr.flashinfer_fusion(12, Version("0.6.17")).reason


def test_explain_no_supported_arch() -> None:
    listed = sr.explain_flashinfer_jit(NO_ARCH, None, None, "12.0a")
    assert listed is not None
    assert "FLASHINFER_CUDA_ARCH_LIST='12.0a' names SM majors [12]" in listed
    assert "0.6.17" in listed
    device = sr.explain_flashinfer_jit(NO_ARCH, (12, 0), Version("12.8"), None)
    assert device is not None
    assert "device is SM120" in device and "nvcc 12.8 is too old" in device
    assert sr.explain_flashinfer_jit("CUDA error: out of memory", (9, 0), None, None) is None


def test_nccl_statistics() -> None:
    assert nl.percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert nl.percentile([5.0], 90) == 5.0
    sizes = nl.message_sizes()
    assert sizes[0] == 7168 * 2 and sizes[-1] == 64 << 20
    assert 7168 * 2 * 3 in sizes  # the 42 KB message of the reference measurement
    assert nl.decode_step_cost_us(50.0) == 50.0 * 122
    a = {"results": [{"bytes": 10, "samples_us": [1.0, 3.0], "correct": True}], "nccl": "2.28.9"}
    b = {"results": [{"bytes": 10, "samples_us": [5.0], "correct": False}], "nccl": "2.28.9"}
    merged = nl.merge([a, b])
    assert merged["repeats"] == 2
    assert merged["results"] == [{"bytes": 10, "samples_us": [1.0, 3.0, 5.0], "correct": False}]
    stats = nl.summarize(merged)
    rows = nl.compare(stats, nl.summarize(a))
    assert rows[0]["p50_ratio"] == 1.5


def test_committed_h200_numbers_are_consistent() -> None:
    """The committed H200 run: the PCIe profile makes 64 MB slower than NCCL defaults."""
    data = json.loads((RESULTS / "runtime.json").read_text(encoding="utf-8"))
    nccl = next(r for r in data["results"] if r["check"] == "runtime.nccl_latency")
    assert nccl["status"] == "PASS"
    big = nccl["evidence"]["rows"][-1]
    assert big["bytes"] == 64 << 20 and big["p50_ratio"] > 2


def test_probe_env_forces_multicast_off() -> None:
    env = probe_env({"NCCL_NVLS_ENABLE": "1", "NCCL_PROTO": "LL"}, drop_prefixes=("NCCL_",))
    for key, value in SAFETY_ENV.items():
        assert env[key] == value
    assert env["NCCL_PROTO"] == "LL"
    assert "PYTHONPATH" not in env


def test_probe_with_an_interpreter_lacking_torch() -> None:
    """This venv has no torch: the probe runs for real and says so."""
    o = run_probe(Path(sys.executable), "torch", env=probe_env(), timeout=60)
    assert o.status == "FAIL"
    assert "import torch failed" in o.reason
    skip = run_probe(Path(sys.executable), "sgl_kernel", env=probe_env(), timeout=60)
    assert skip.status == "SKIP" and "not installed" in skip.reason


def test_probe_missing_interpreter_hang_and_crash(tmp_path: Path) -> None:
    missing = run_probe(tmp_path / "bin" / "python", "torch", env=probe_env(), timeout=5)
    assert missing.status == "ERROR" and "does not exist" in missing.reason
    hang = tmp_path / "hang"
    hang.write_text("#!/bin/sh\nsleep 30\n")
    hang.chmod(0o755)
    o = run_probe(hang, "torch", env=probe_env(), timeout=1)
    assert o.status == "FAIL" and "did not finish within 1 s" in o.reason
    crash = tmp_path / "crash"
    crash.write_text("#!/bin/sh\necho 'Segmentation fault' >&2\nkill -SEGV $$\n")
    crash.chmod(0o755)
    o = run_probe(crash, "torch", env=probe_env(), timeout=10)
    assert o.status == "FAIL" and "signal 11" in o.reason and "Segmentation fault" in o.reason


def test_distributed_probe_failure_is_reported(tmp_path: Path) -> None:
    """Without torch the ranks exit at once: a FAIL with their logs, no hang, no traceback."""
    o = run_distributed(
        Path(sys.executable),
        ["nccl", "14336", "5"],
        world_size=2,
        env=probe_env(),
        timeout=60,
        log_dir=tmp_path,
        tag="t",
    )
    assert o.status == "FAIL"
    assert "without a result" in o.reason
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nccl-t-rank0.log", "nccl-t-rank1.log"]


def test_runtime_group_without_env_or_interpreter(tmp_path: Path) -> None:
    stack = load_stack("cu130")
    assert run_group(RunContext(stack=stack))[0].status == "SKIP"
    (tmp_path / "env").mkdir()
    out = run_group(RunContext(stack=stack, env_path=tmp_path / "env"))
    assert out[0].status == "ERROR" and "no interpreter" in out[0].reason


def _with_flags(*flags: str):  # type: ignore[no-untyped-def]
    manifest = load_stack("cu130").manifest
    profile = manifest.serving["kimi-k25-tp8"].model_copy(update={"extra_args": list(flags)})
    return manifest.model_copy(update={"serving": {"kimi-k25-tp8": profile}})


def test_symm_mem_keyerror_is_a_named_fail_when_the_profile_enables_it() -> None:
    from validators.runtime.group import _sglang_decisions

    by = {
        r.check: r
        for r in _sglang_decisions(_with_flags("--enable-torch-symm-mem"), (12, 0), "pcie")
    }
    symm = by["runtime.sglang.torch_symm_mem"]
    assert symm.status == "FAIL"
    assert "KeyError: 12" in symm.reason and "remove --enable-torch-symm-mem" in symm.reason
    # without the flag: a SKIP that still says what would happen
    quiet = {r.check: r for r in _sglang_decisions(_with_flags(), (12, 0), "pcie")}
    assert quiet["runtime.sglang.torch_symm_mem"].status == "SKIP"
    # an installed SGLang whose table gained 12 is believed over the recorded one
    fixed = {
        r.check: r
        for r in _sglang_decisions(
            _with_flags("--enable-torch-symm-mem"), (12, 0), "pcie", [9, 10, 12]
        )
    }
    assert fixed["runtime.sglang.torch_symm_mem"].status == "PASS"


def test_fusion_flag_on_sm120_is_a_fail_and_pcie_tp8_has_no_custom_allreduce() -> None:
    from validators.runtime.group import _sglang_decisions

    by = {
        r.check: r
        for r in _sglang_decisions(
            _with_flags("--enable-flashinfer-allreduce-fusion"), (12, 0), "pcie"
        )
    }
    assert by["runtime.sglang.allreduce_fusion"].status == "FAIL"
    assert "0.6.17" in by["runtime.sglang.allreduce_fusion"].reason
    assert "custom all-reduce off" in by["runtime.sglang.custom_allreduce"].reason


def test_the_probe_table_and_the_probe_script_name_the_same_probes() -> None:
    """probes/smoke.py runs in the env's interpreter and keeps its own map; the script, asked
    for a probe it lacks, lists what it knows: exactly the table's probes, no more, no fewer."""
    from validators.core.checks import GROUP_CHECKS
    from validators.runtime.probe_table import PROBES

    script = Path(__file__).resolve().parents[2] / "validators" / "runtime" / "probes" / "smoke.py"
    done = subprocess.run([sys.executable, str(script), "no-such-probe"], capture_output=True, text=True)
    assert done.returncode == 2
    lines = done.stdout.splitlines()
    said = next(json.loads(x.split(" ", 1)[1]) for x in lines if x.startswith("STACKGATE_PROBE "))
    known = said["reason"].split("known: ", 1)[1].split(", ")
    assert sorted(known) == sorted(p.name for p in PROBES)
    assert {p.check for p in PROBES} <= set(GROUP_CHECKS["runtime"])
