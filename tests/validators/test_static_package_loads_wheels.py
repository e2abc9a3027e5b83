"""What packages other than torch load themselves, read from their source, judged against real
loads (/proc/self/maps of a child of the env's interpreter).

- onnxruntime-gpu 1.22.0 names the CUDA libraries of nvidia-* wheels in `preload_dlls()`, which
  nothing calls at import: `import onnxruntime` maps none of them, `preload_dlls()` maps them.
- jax-cuda12 0.8.1's plugin (`jax_plugins/xla_cuda12`) loads them in `initialize()`, which jax
  calls at backend start: `import jax` maps none of cuBLAS/cuSOLVER, `jax.devices()` maps them.
- cupy-cuda12x 13.4.1 names none of them; its import loads computed paths (a JSON config):
  what those are is unknown to the reading, and `import cupy` maps no cuSOLVER.
- torchaudio 2.9.1 loads its own lib/libtorchaudio.so at import (`_load_lib("libtorchaudio")`),
  which its extension _torchaudio.so needs with no RPATH: the resolution reads that from the
  source; with the source unreadable the verdict says the load is unknown (WARN), not assumed.
Envs are uv installs hardlinked from the uv cache under ~/.cache/stackgate/abi-envs.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.validators.test_static_corpus_wheels import corpus_env
from validators.static.abi_check import AbiChecker
from validators.static.abi_results import AbiOptions, abi_results
from validators.static.environment import load_environment
from validators.static.package_loads import PackageLoads

pytestmark = [pytest.mark.network, pytest.mark.slow, pytest.mark.timeout(2400)]

TRIO = ["torch==2.6.0", "onnxruntime-gpu==1.22.0", "cupy-cuda12x==13.4.1"]
CU12 = [
    "nvidia-cublas-cu12==12.8.4.1",
    "nvidia-cuda-nvrtc-cu12==12.8.93",
    "nvidia-cuda-runtime-cu12==12.8.90",
    "nvidia-cudnn-cu12==9.10.2.21",
    "nvidia-cufft-cu12==11.3.3.83",
    "nvidia-cusolver-cu12==11.7.3.90",
    "nvidia-cusparse-cu12==12.5.8.93",
    "nvidia-nvjitlink-cu12==12.8.93",
    "nvidia-nccl-cu12==2.27.5",
    "nvidia-cuda-cupti-cu12==12.8.90",
    "nvidia-nvshmem-cu12==3.3.20",
]
MAPS = (
    "def mapped():\n"
    "    return sorted({l.split()[-1].rsplit('/', 1)[-1] for l in open('/proc/self/maps')"
    " if '/nvidia/' in l or 'torchaudio' in l})\n"
)


def _maps(env: Path, code: str) -> list[list[str]]:
    """Run `code` (which prints json.dumps(mapped()) at each point of interest) in a child."""
    done = subprocess.run(
        [str(env / "bin" / "python"), "-I", "-c", "import json\n" + MAPS + code],
        capture_output=True,
        text=True,
        timeout=600,
        cwd="/",
    )
    import json

    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("[")]


def _loads(env: Path, dist: str) -> PackageLoads:
    checker = AbiChecker(load_environment(env))
    loads = checker.package_loads(checker.env.distributions[dist])
    assert loads is not None
    return loads


def test_onnxruntime_loads_cuda_libraries_only_in_preload_dlls() -> None:
    env = corpus_env("t260-ort122-cupy1341", TRIO, [])
    loads = _loads(env, "onnxruntime-gpu")
    for soname in ("libcublasLt.so.12", "libcudnn.so.9", "libcufft.so.11"):
        site = loads.site_for(soname)
        assert site is not None and site.member == "onnxruntime/__init__.py", soname
        assert site.entry == "preload_dlls", site
    after_import, after_preload = _maps(
        env,
        "import onnxruntime\nprint(json.dumps(mapped()))\n"
        "onnxruntime.preload_dlls()\nprint(json.dumps(mapped()))\n",
    )
    assert "libcublasLt.so.12" not in after_import  # the truth: not at import
    assert {"libcublasLt.so.12", "libcudnn.so.9", "libcufft.so.11"} <= set(after_preload)


def test_jax_plugin_loads_cuda_libraries_at_backend_start() -> None:
    env = corpus_env("jax081-cuda12", ["jax[cuda12]==0.8.1", *CU12], [])
    loads = _loads(env, "jax-cuda12-pjrt")
    read = {s: loads.site_for(s) for s in ("libcublas.so.12", "libcusolver.so.11")}
    for soname, site in read.items():
        assert site is not None and site.entry == "initialize", (soname, site)
        assert site.member == "jax_plugins/xla_cuda12/__init__.py"
    after_import, after_devices = _maps(
        env,
        "import jax\nprint(json.dumps(mapped()))\n"
        "try:\n    jax.devices()\nexcept Exception:\n    pass\nprint(json.dumps(mapped()))\n",
    )
    assert not set(read) & set(after_import)
    assert set(read) <= set(after_devices)


def test_cupy_names_no_cusolver_and_its_computed_loads_are_unknown() -> None:
    env = corpus_env("t260-ort122-cupy1341", TRIO, [])
    loads = _loads(env, "cupy-cuda12x")
    assert loads.site_for("libcusolver.so.11") is None
    computed = [c for c in loads.computed if c.entry is None]
    assert any(c.member == "cupy/_environment.py" for c in computed), loads.computed
    (after_import,) = _maps(env, "import cupy\nprint(json.dumps(mapped()))\n")
    assert "libcusolver.so.11" not in after_import
    # the verdict keeps the FAIL and says what the reading cannot know
    results = {
        r.check: r
        for r in abi_results(
            load_environment(env), _shared(env), None, options=AbiOptions(confirm=False)
        )
    }
    r = results["static.abi.cupy_cuda12x"]
    assert r.status == "FAIL", r.reason
    assert "cupy-cuda12x loads computed paths at import (cupy/_environment.py:" in r.reason
    assert "whether they include libcusolver.so.11 is unknown" in r.reason


def _shared(env: Path) -> list[Path]:
    return load_environment(env).shared_objects()


def test_torchaudio_own_library_load_is_read_from_its_source() -> None:
    env = corpus_env("ta291-t291", ["torch==2.9.1", "torchaudio==2.9.1"], [])
    loads = _loads(env, "torchaudio")
    site = loads.site_for("libtorchaudio.so")
    assert site is not None and site.entry is None, site  # at import
    (after_import,) = _maps(env, "import torch, torchaudio\nprint(json.dumps(mapped()))\n")
    assert "libtorchaudio.so" in after_import  # the truth: its import loads it
    checker = AbiChecker(load_environment(env))
    extension = env / "lib/python3.12/site-packages/torchaudio/lib/_torchaudio.so"
    findings = checker.check([extension])
    assert (extension, "libtorchaudio.so") in {(p, s) for p, s in checker.resolver.package_preloads}
    assert findings.package_loads_unread == []


def test_an_own_library_the_source_does_not_name_is_unknown_not_assumed() -> None:
    """The same env with the package's sources unreadable: the file is still found (its
    symbols are checked), and the verdict says whether the package loads it is unknown."""
    env = corpus_env("ta291-t291", ["torch==2.9.1", "torchaudio==2.9.1"], [])
    loaded = load_environment(env)
    checker = AbiChecker(loaded, trees=lambda dist: None)
    extension = env / "lib/python3.12/site-packages/torchaudio/lib/_torchaudio.so"
    findings = checker.check([extension])
    assert findings.package_loads_unread == [(extension, "libtorchaudio.so")]
    shared = [p for p in _shared(env) if "torchaudio" in str(p)]
    results = abi_results(loaded, shared, None, trees=lambda dist: None)
    r = {x.check: x for x in results}["static.abi.torchaudio"]
    assert r.status == "PASS" and r.evidence["severity"] == "WARN", r.reason
    assert "_torchaudio.so needs libtorchaudio.so" in r.reason
    assert "whether the package loads it first is unknown" in r.reason


def test_torchaudio_libraries_loaded_by_modules_imported_later_are_read() -> None:
    """torchaudio's CTC decoder module (not run by `import torchaudio`) loads
    lib/libctc_prefix_decoder.so before its extension; torchaudio 2.8's torio loads
    `f"libtorio_ffmpeg{version}"`: both are read (every file, f-strings as globs), so no
    library of the package is left unknown and the package's verdict carries no WARN for it."""
    env = corpus_env("ta291-t291", ["torch==2.9.1", "torchaudio==2.9.1"], [])
    loaded = load_environment(env)
    results = abi_results(
        loaded,
        [p for p in _shared(env) if "torchaudio" in str(p)],
        None,
        options=AbiOptions(confirm=False),
    )
    r = {x.check: x for x in results}["static.abi.torchaudio"]
    assert "own_loads_unknown" not in r.evidence, r.reason
    code = (
        "import torch, torchaudio.models.decoder._cuda_ctc_decoder as d\n"
        "print(json.dumps(mapped()))\n"
    )
    (after,) = _maps(env, code)
    assert "libctc_prefix_decoder.so" in after  # the truth: that module loads it itself
    old = corpus_env("ta28-t291", ["torch==2.9.1"], ["torchaudio==2.8.0"])
    checker = AbiChecker(load_environment(old))
    site = checker.package_loads(checker.env.distributions["torchaudio"])
    assert site is not None
    every = checker._package_loads(checker.env.distributions["torchaudio"], every=True)
    assert every is not None
    hit = every.site_for("libtorio_ffmpeg6.so")
    assert hit is not None and hit.text == "libtorio_ffmpeg*", hit
    assert hit.member == "torio/_extension/utils.py"


def test_a_library_loaded_from_a_computed_folder_is_not_the_envs_copy() -> None:
    """sgl-kernel 0.3.21 loads "libcudart.so.12" at import from CUDA_HOME or the system
    folders (sgl_kernel/load_utils.py): its source names the file but not the env's
    nvidia/cuda_runtime/lib, so that copy is not counted as loaded first by it; jax's plugin
    names the folder beside the file (`_load("cublas", [...])`)."""
    from tests.validators.test_real_wheels import real_env

    env = real_env("2.9.1")  # torch 2.9.1 + sgl-kernel 0.3.21
    site = env / "lib" / "python3.12" / "site-packages"
    cudart = site / "nvidia" / "cuda_runtime" / "lib" / "libcudart.so.12"
    hit = _loads(env, "sgl-kernel").site_for(cudart.name)
    assert hit is not None and hit.entry is None, hit  # named, at import
    assert hit.member == "sgl_kernel/load_utils.py" and not hit.names_folder(cudart)
    jax = corpus_env("jax081-cuda12", ["jax[cuda12]==0.8.1", *CU12], [])
    cublas = jax / "lib" / "python3.12" / "site-packages" / "nvidia" / "cublas" / "lib"
    jax_hit = _loads(jax, "jax-cuda12-pjrt").site_for("libcublas.so.12")
    assert jax_hit is not None and jax_hit.names_folder(cublas / "libcublas.so.12")
