"""A GPU library no wheel installed (a kernel compiled into the env at build time) must run on
the stack's target archs even when its file name states another GPU: the name exemption is for
packages' kernels the engine selects only on other GPUs, not for the build's own modules.
Uses the committed nvcc-built fixture libold.so (sm_80, sm_86)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.validators import elf_env
from tests.validators.test_fatbin import FIXTURES
from validators.static.run import StaticInputs, run_static


def _env_with_unowned(tmp_path: Path, name: str) -> Path:
    site = elf_env.new_env(tmp_path / "env")
    target = site / "flashinfer" / "data" / "aot" / name / f"{name}.so"
    target.parent.mkdir(parents=True)
    shutil.copy2(FIXTURES / "libold.so", target)
    return tmp_path / "env"


def test_a_build_time_kernel_named_for_another_gpu_is_a_failure(tmp_path: Path) -> None:
    env = _env_with_unowned(tmp_path, "batch_mla_attention_sm80")
    results = [r for r in run_static(StaticInputs(env_path=env, targets=("9.0a",)))]
    arch = [r for r in results if r.check.startswith("static.arch")]
    assert len(arch) == 1 and arch[0].status == "FAIL", arch
    assert "flashinfer/data/aot/batch_mla_attention_sm80" in arch[0].reason
    assert "no SASS that runs on 9.0a" in arch[0].reason


def test_a_build_time_kernel_for_the_target_passes(tmp_path: Path) -> None:
    env = _env_with_unowned(tmp_path, "norm")
    (arch,) = [
        r
        for r in run_static(StaticInputs(env_path=env, targets=("8.6",)))
        if r.check.startswith("static.arch")
    ]
    assert arch.status == "PASS" and "sm_86" in arch.reason, arch
