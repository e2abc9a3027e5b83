"""What `import torch` really loads first, on real PyPI wheels, judged against real loads.

`uv pip install torch==2.6.0 onnxruntime-gpu==1.22.0 cupy-cuda12x==13.4.1` (Python 3.12):
torch 2.6.0's import loads the DT_NEEDED closure of libtorch_global_deps.so and torch/_C
(cuBLAS, cuDNN, cuFFT, cuSPARSE, ... through their RPATH) plus the nvrtc/nvJitLink its
`_load_global_deps` preloads; cuSOLVER only behind libtorch_cuda_linalg.so, loaded lazily. So
after `import torch`, cupy 13.4.1's cublas module loads and its cusolver modules cannot
(`libcusolver.so.11: cannot open shared object file`), while `import cupy` works: DEGRADED.
The same env's uv.lock gives the same modules before install (the lists from the wheels' bytes).
Envs are uv installs (~5 GB, hardlinked from the uv cache) under ~/.cache/stackgate/abi-envs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.validators.test_static_corpus_wheels import corpus_env
from validators.core.results import Result
from validators.static.abi_check import AbiChecker
from validators.static.environment import load_environment
from validators.static.preloaders import torch_source_preloads
from validators.static.run import StaticInputs, run_static

pytestmark = [pytest.mark.network, pytest.mark.slow, pytest.mark.timeout(2400)]

TRIO = ["torch==2.6.0", "onnxruntime-gpu==1.22.0", "cupy-cuda12x==13.4.1"]
CUSOLVER_MODULES = {
    "cupy_backends.cuda.libs.cusolver": ["libcusolver.so.11"],
    "cupyx.cusolver": ["libcusolver.so.11"],
}


@pytest.fixture(scope="module")
def trio() -> Path:
    return corpus_env("t260-ort122-cupy1341", TRIO, [])


def _real_imports(env: Path, *modules: str) -> dict[str, str]:
    """Import `modules` in order in one child of the env's interpreter: 'ok' or the error."""
    code = (
        "import importlib, json, sys\nout = {}\nfor m in sys.argv[1:]:\n"
        "    try:\n        importlib.import_module(m); out[m] = 'ok'\n"
        "    except Exception as e:\n        out[m] = str(e)\nprint(json.dumps(out))\n"
    )
    done = subprocess.run(
        [str(env / "bin" / "python"), "-I", "-c", code, *modules],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return dict(json.loads(done.stdout.splitlines()[-1]))


def _abi(env: Path) -> dict[str, Result]:
    results = run_static(StaticInputs(env_path=env))
    return {r.check: r for r in results if r.check.startswith("static.abi.")}


def test_torch_260_source_names_its_preloads(trio: Path) -> None:
    text = (trio / "lib" / "python3.12" / "site-packages" / "torch" / "__init__.py").read_text()
    pre = torch_source_preloads(text)
    always = {(p.folder, p.guard) for p in pre if not p.fallback}
    guard = "nvidia/cuda_runtime/lib/libcudart.so"
    assert always == {("cuda_nvrtc", guard), ("nvjitlink", guard)}
    fallback = {p.folder for p in pre if p.fallback}
    assert {"cublas", "cudnn", "cusolver", "nccl", "nvjitlink"} <= fallback


def test_torch_260_import_closure_is_read_from_its_files(trio: Path) -> None:
    checker = AbiChecker(load_environment(trio))
    closure = checker.import_closure
    assert closure is not None and not closure.fallback_used
    loaded = set(closure.loaded)
    # what torch/_C and libtorch_global_deps.so link, and what __init__ preloads
    assert {"libcublas.so.12", "libcudnn.so.9", "libcudart.so.12", "libnccl.so.2"} <= loaded
    assert {"libnvJitLink.so.12", "libnvrtc.so.12"} <= loaded
    # cuSOLVER: behind libtorch_cuda_linalg.so, loaded lazily
    assert "libcusolver.so.11" not in loaded
    assert "libtorch_cuda_linalg.so" not in loaded


def test_cupy_beside_torch_260_names_the_modules_a_real_load_cannot_import(
    trio: Path,
) -> None:
    truth = _real_imports(
        trio,
        "torch",
        "cupy",
        "cupy_backends.cuda.libs.cublas",
        "cupy_backends.cuda.libs.cusolver",
    )
    assert truth["torch"] == truth["cupy"] == "ok", truth
    assert truth["cupy_backends.cuda.libs.cublas"] == "ok", truth
    assert (
        "libcusolver.so.11: cannot open shared object file"
        in (truth["cupy_backends.cuda.libs.cusolver"])
    )
    r = _abi(trio)["static.abi.cupy_cuda12x"]
    assert r.status == "FAIL", r.reason
    assert r.evidence["impact"] == "DEGRADED"
    assert r.evidence["modules_that_cannot_load"] == CUSOLVER_MODULES
    assert r.reason.startswith(
        "DEGRADED: `import cupy, cupy_backends, cupyx` works (a load: it works; no import-time "
        "import of its modules reaches them), but 2 modules cannot load: "
        "cupy_backends.cuda.libs.cusolver (lacks libcusolver.so.11), cupyx.cusolver (lacks "
        "libcusolver.so.11)"
    ), r.reason
    assert "libcublas" not in r.reason
    assert "(torch 2.6.0) loads" in r.reason and "not libcusolver.so.11" in r.reason


def test_the_lock_names_the_same_modules_before_install(trio: Path, tmp_path: Path) -> None:
    from stackgate.lock.wheels import read_lock
    from validators.elf.facts_cache import FactsCache, default_root
    from validators.lockcheck.check import LockInputs, find_interpreter, run_lock_check

    project = tmp_path / "project"
    project.mkdir()
    deps = ", ".join(f'"{r}"' for r in TRIO)
    (project / "pyproject.toml").write_text(
        '[project]\nname = "trio"\nversion = "0"\nrequires-python = ">=3.12,<3.13"\n'
        f"dependencies = [{deps}]\n[tool.uv]\n"
        "environments = [\"sys_platform == 'linux' and platform_machine == 'x86_64'\"]\n",
        encoding="utf-8",
    )
    python = trio / "bin" / "python"
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv not on PATH")
    subprocess.run(
        [uv, "lock", "-q", "--python", str(python), "--directory", str(project)], check=True
    )
    lock = project / "uv.lock"
    wheels = read_lock(lock)
    results, _ = run_lock_check(
        LockInputs(
            lock=lock,
            wheels=wheels,
            cache=FactsCache(default_root()),
            interpreter=find_interpreter(wheels.python),
        )
    )
    by = {r.check: r for r in results}
    r = by["static.abi.cupy_cuda12x"]
    installed = _abi(trio)["static.abi.cupy_cuda12x"]
    assert r.status == installed.status == "FAIL", r.reason
    assert r.evidence["modules_that_cannot_load"] == CUSOLVER_MODULES
    # no load before install: the import-time walk of the wheel's sources (byte ranges)
    assert r.evidence["impact"] == installed.evidence["impact"] == "DEGRADED"
    assert r.evidence["impact_from_load"] == "NOT RUN"
    assert "libcublas" not in r.reason
    # the lock's statuses agree with the installed env's for every package
    env_status = {k: v.status for k, v in _abi(trio).items() if k != "static.abi.summary"}
    lock_status = {k: by[k].status for k in env_status if k in by}
    assert lock_status == {k: env_status[k] for k in lock_status}


def test_torch_2_10_preloads_through_its_helper_as_a_real_import_does() -> None:
    """torch 2.10 moved its preloads into `_preload_cuda_deps()` walking a list of pairs
    through `_preload_cuda_lib`, and preloads every CUDA library whenever libcudart loaded:
    the closure read from the source must hold what a real `import torch` maps."""
    from tests.validators.test_real_wheels import real_env

    env = real_env("2.10.0")
    site = env / "lib" / "python3.12" / "site-packages"
    pre = torch_source_preloads((site / "torch" / "__init__.py").read_text())
    always = [p.folder for p in pre if not p.fallback]
    assert {"cublas", "cuda_nvrtc", "cusolver", "nccl", "nvjitlink"} <= set(always)
    assert [p.folder for p in pre if not p.required] == ["nvtx", "nvtx"]  # fallback + guarded
    code = "import torch\nprint(open('/proc/self/maps').read())"
    done = subprocess.run(
        [str(env / "bin" / "python"), "-I", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    mapped = {Path(line.split()[-1]).name for line in done.stdout.splitlines() if ".so" in line}
    closure = AbiChecker(load_environment(env)).import_closure
    assert closure is not None
    for soname in ("libnvrtc.so.12", "libcusolver.so.11", "libcublasLt.so.12"):
        assert soname in mapped, soname  # the ground truth
        assert soname in closure.loaded, soname
