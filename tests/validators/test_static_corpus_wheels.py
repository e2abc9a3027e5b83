"""Issue 17 on real PyPI wheels: a plugin break, a crash at load, an optional dependency.

torch 2.9.1 from PyPI (+cu128) with, installed --no-deps as a user forcing the pair would:
- torchvision 0.21.0 (built for torch 2.6): `_C.so` (no PyInit_) imports
  torch::autograd::Node::name() const, gone from 2.9.1 -> FAIL, confirmed by a load;
- torchvision 0.23.0 (built for torch 2.8): every symbol resolves, `import torchvision`
  dies with SIGSEGV in a static initialiser -> FAIL "crashes at load";
- numba (tbbpool needs libtbb.so.12 from the optional tbb) -> WARN, never FAIL;
- torchvision 0.24.1 after `pip uninstall nvidia-cusparselt-cu12` -> torch FAIL statically
  (libcusparseLt.so.0 is below torchvision and torch requires the wheel), not "optional".
Envs are uv installs (~4 GB, hardlinked from the uv cache) under ~/.cache/stackgate/abi-envs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from stackgate.errors import EnvironmentProblem
from stackgate.python_finder import find_python
from tests.helpers.cache_lock import cache_lock
from validators.core.results import Result
from validators.static.abi_results import AbiOptions
from validators.static.run import StaticInputs, run_static

pytestmark = [pytest.mark.network, pytest.mark.slow, pytest.mark.timeout(2400)]

CACHE = Path(
    os.environ.get("STACKGATE_ABI_ENVS", Path.home() / ".cache" / "stackgate" / "abi-envs")
)


def corpus_env(
    name: str, install: list[str], forced: list[str], uninstall: tuple[str, ...] = ()
) -> Path:
    env = CACHE / name
    with cache_lock(env):
        if (env / ".complete").is_file():
            return env
        uv = shutil.which("uv")
        if uv is None:
            pytest.skip("uv not on PATH")
        try:
            python = find_python("3.12")
        except EnvironmentProblem as exc:
            pytest.skip(f"no Python 3.12: {exc.message}")
        shutil.rmtree(env, ignore_errors=True)
        env.parent.mkdir(parents=True, exist_ok=True)
        vars_ = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
        py = str(env / "bin" / "python")
        for argv in (
            [uv, "venv", "-q", "--python", str(python.path), str(env)],
            [uv, "pip", "install", "-q", "--python", py, *install],
            *(
                [[uv, "pip", "install", "-q", "--python", py, "--no-deps", *forced]]
                if forced
                else []
            ),
            *([[uv, "pip", "uninstall", "-q", "--python", py, *uninstall]] if uninstall else []),
        ):
            done = subprocess.run(argv, capture_output=True, text=True, env=vars_, timeout=1800)
            if done.returncode != 0:
                pytest.fail(f"{' '.join(argv)}: {done.stderr.strip()[-400:]}")
        (env / ".complete").write_text("ok\n", encoding="utf-8")
    return env


def _abi(env: Path, **abi: bool) -> dict[str, Result]:
    inputs = StaticInputs(env_path=env, abi=AbiOptions(**abi))
    return {r.check: r for r in run_static(inputs) if "abi" in r.check}


def test_torchvision_0_21_plugin_break_is_found_and_confirmed() -> None:
    env = corpus_env("tv021-t291", ["torch==2.9.1"], ["torchvision==0.21.0"])
    tv = _abi(env)["static.abi.torchvision"]
    assert tv.status == "FAIL", tv.reason
    assert "torch::autograd::Node::name() const" in tv.reason
    assert "confirmed by a load" in tv.reason and "undefined symbol" in tv.reason
    assert any(p.endswith("torchvision/_C.so") for p in tv.evidence["failing_objects"])


def test_torchvision_0_23_crash_at_load_is_found() -> None:
    env = corpus_env("tv023-t291", ["torch==2.9.1"], ["torchvision==0.23.0"])
    tv = _abi(env)["static.abi.torchvision"]
    assert tv.status == "FAIL", tv.reason
    assert tv.reason.startswith("crashes at load (") and "SIGSEGV" in tv.reason
    assert "import torchvision" in tv.reason and "torchvision/_C.so" in tv.reason
    assert "torch 2.9.1" in tv.reason  # the unmet torch==2.8.0 that triggered the load


def test_optional_tbb_is_a_warning() -> None:
    env = corpus_env("numba-t291", ["torch==2.9.1", "numba"], [])
    results = _abi(env)
    numba = results["static.abi.numba"]
    assert numba.status == "PASS" and numba.evidence["severity"] == "WARN", numba.reason
    assert "libtbb.so.12" in numba.reason
    assert all(r.status != "FAIL" for r in results.values()), {
        k: r.reason[:200] for k, r in results.items() if r.status == "FAIL"
    }


def test_uninstalled_library_wheel_is_a_missing_dependency_not_optional() -> None:
    env = corpus_env(
        "t291-tv0241-no-cusparselt",
        ["torch==2.9.1", "torchvision==0.24.1"],
        [],
        uninstall=("nvidia-cusparselt-cu12",),
    )
    results = _abi(env, confirm=False)
    torch = results["static.abi.torch"]
    assert torch.status == "FAIL", torch.reason
    first = torch.reason.split(" | ")[0]
    assert "libcusparseLt.so.0" in first and "libtorch_cuda.so is below torchvision" in first
    assert "requires nvidia-cusparselt-cu12==0.7.1, not installed" in first
    assert "takes down with it: torchvision 0.24.1" in torch.reason
    assert results["static.abi.torchvision"].status == "FAIL"
    loaded = _abi(env)["static.abi.torch"]
    assert "confirmed by a load" in loaded.reason and "libcusparseLt.so.0" in loaded.reason


@pytest.mark.parametrize("version", ["11.2.1.3", "11.3.0.4"])
def test_cufft_kernels_kept_in_data_cover_hopper(version: str) -> None:
    """Issue 25 item 2 / issue 22 item 5: libcufft.so.11's .nv_fatbin is an sm_52 stub (all
    cuobjdump lists); its 17,607 (11.2.1.3) / 22,705 (11.3.0.4) fatbins sit in .data."""
    env = corpus_env(f"cufft-{version}", [f"nvidia-cufft-cu12=={version}"], [])
    inputs = StaticInputs(env_path=env, targets=("9.0",), abi=AbiOptions(confirm=False))
    arch = {r.check: r for r in run_static(inputs)}["static.arch.nvidia_cufft_cu12"]
    assert arch.status == "PASS", arch.reason
    codes = arch.evidence["libraries"]["nvidia/cufft/lib/libcufft.so.11"]
    assert {"sm_52", "sm_90", "compute_90"} <= set(codes), codes
    assert "unknown_gpu_code" not in arch.evidence
