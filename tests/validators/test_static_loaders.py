"""Libraries resolved the way each package's loader finds them (issue 25 item 4), on tiny real
ELF envs (gcc) with real confirming loads.

cupy-cuda12x 13.4.1 links libcublas.so.12 with no RUNPATH and does not search nvidia/*/lib:
beside nvidia-cublas-cu12 and no torch, its cublas module cannot load; after `import torch`
(whose torch/_C links libcublas.so.12 through its RPATH) it can. A library torch's import does
not load (its cuSOLVER, behind a lazily loaded library) still cannot be found after it. Its
optional cudnn module needs libcudnn.so.8 where the env has libcudnn.so.9: cuDNN 8, not "a
CUDA-8 build", and optional.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.validators import elf_env
from tests.validators.static_run import static_results

pytestmark = pytest.mark.skipif(not elf_env.have_compilers(), reason="needs gcc and g++")

EXT = "cpython-312-x86_64-linux-gnu.so"


def _nvidia_lib(site: Path, folder: str, soname: str, dist: str) -> Path:
    lib = elf_env.gcc(
        site / "nvidia" / folder / "lib" / soname,
        f"int {folder}_fn(void) {{ return 1; }}\n",
        f"-Wl,-soname,{soname}",
    )
    elf_env.add_dist(site, dist, "12.8.4.1", [lib])
    return lib


def _cupyish(tmp_path: Path, *, with_torch: bool) -> Path:
    root = tmp_path / "env"
    site = elf_env.new_env(root)
    cublas = _nvidia_lib(site, "cublas", "libcublas.so.12", "nvidia-cublas-cu12")
    cudnn9 = _nvidia_lib(site, "cudnn", "libcudnn.so.9", "nvidia-cudnn-cu12")
    build = tmp_path / "build"
    cudnn8 = elf_env.gcc(
        build / "libcudnn.so.8", "int cudnn_fn(void){return 8;}\n", "-Wl,-soname,libcudnn.so.8"
    )
    cusolver = _nvidia_lib(site, "cusolver", "libcusolver.so.11", "nvidia-cusolver-cu12")
    mods = [
        elf_env.gcc(
            site / "cupyish" / f"cusolver.{EXT}",
            "extern int cusolver_fn(void);\nint PyInit_cusolver(void){return cusolver_fn();}\n",
            f"-L{cusolver.parent}",
            "-l:libcusolver.so.11",
        ),
        elf_env.gcc(
            site / "cupyish" / f"cublas.{EXT}",
            "extern int cublas_fn(void);\nint PyInit_cublas(void){return cublas_fn();}\n",
            f"-L{cublas.parent}",
            "-l:libcublas.so.12",
        ),
        elf_env.gcc(
            site / "cupyish" / f"cudnn.{EXT}",
            "extern int cudnn_fn(void);\nint PyInit_cudnn(void){return cudnn_fn();}\n",
            f"-L{cudnn8.parent}",
            "-l:libcudnn.so.8",
        ),
    ]
    elf_env.add_package(site, "cupyish", [*mods, site / "cupyish" / "__init__.py"])
    assert cudnn9.exists()
    if with_torch:
        # torch's shape: torch/_C links libcublas.so.12 by its RPATH (so `import torch` loads
        # it); libtorch_cuda_linalg.so (libcusolver.so.11) is loaded only when linalg is used
        rpath = "-Wl,--disable-new-dtags,-rpath,$ORIGIN/../nvidia/cublas/lib"
        c_ext = elf_env.gcc(
            site / "torch" / f"_C.{EXT}",
            "extern int cublas_fn(void);\nint PyInit__C(void){return cublas_fn();}\n",
            f"-L{cublas.parent}",
            "-l:libcublas.so.12",
            rpath,
        )
        linalg = elf_env.gcc(
            site / "torch" / "lib" / "libtorch_cuda_linalg.so",
            "extern int cusolver_fn(void);\nint linalg(void){return cusolver_fn();}\n",
            f"-L{cusolver.parent}",
            "-l:libcusolver.so.11",
            "-Wl,--disable-new-dtags,-rpath,$ORIGIN/../../nvidia/cusolver/lib",
        )
        elf_env.add_package(site, "torch", [c_ext, linalg])
        (site / "torch" / "__init__.py").write_text(
            "import importlib\nimportlib.import_module('torch._C')\n", encoding="utf-8"
        )
    return root


def test_pip_cublas_is_not_on_the_path_of_a_package_that_does_not_search_it(
    tmp_path: Path,
) -> None:
    r = static_results(_cupyish(tmp_path, with_torch=False))["static.abi.cupyish"]
    assert r.status == "FAIL", r.reason
    assert (
        "DT_NEEDED libraries the env installs where its loader does not look (no RUNPATH to "
        "them, and no import that runs first loads them): libcublas.so.12 (at "
        "nvidia/cublas/lib/libcublas.so.12)" in r.reason
    )
    assert "no import in the env loads libcublas.so.12 first (no torch)" in r.reason
    assert "confirmed by a load: cupyish/cublas" in r.reason
    assert "libcublas.so.12: cannot open shared object file" in r.reason
    # the optional cuDNN 8 module is a warning, named for cuDNN
    assert "libcudnn.so.8 missing but the env has libcudnn.so.9 (built for cudnn 8" in r.reason
    assert "CUDA-8" not in r.reason


def test_after_import_torch_what_torch_loads_is_found_and_nothing_else(tmp_path: Path) -> None:
    r = static_results(_cupyish(tmp_path, with_torch=True))["static.abi.cupyish"]
    assert r.status == "FAIL", r.reason
    # cuBLAS: torch/_C's closure, loaded by `import torch`: the cublas module loads
    assert "libcublas" not in r.reason
    # cuSOLVER: only behind torch's lazily loaded library: the cusolver module cannot load,
    # while `import cupyish` works (its __init__ imports neither module)
    assert r.reason.startswith(
        "DEGRADED: `import cupyish` works (a load: it works; no import-time import of its "
        "modules reaches them), but 1 module cannot load: cupyish.cusolver (lacks "
        "libcusolver.so.11)"
    ), r.reason
    assert "`import torch` (torch 1.0) loads 2 libraries at import, not libcusolver.so.11" in (
        r.reason
    )
    assert r.evidence["impact"] == "DEGRADED"
    assert r.evidence["modules_that_cannot_load"] == {"cupyish.cusolver": ["libcusolver.so.11"]}
    assert "confirmed by a load: cupyish/cusolver" in r.reason
    assert "optional:" in r.reason and "libcudnn.so.8" in r.reason
    # without a load: the same modules, the impact from the import-time walk of the sources
    quiet = static_results(_cupyish(tmp_path / "q", with_torch=True), confirm=False)
    q = quiet["static.abi.cupyish"]
    assert q.status == "FAIL" and q.evidence["impact"] == "DEGRADED", q.reason
    assert q.evidence["impact_from_load"] == "NOT RUN"
    assert q.evidence["modules_that_cannot_load"] == r.evidence["modules_that_cannot_load"]


def test_a_module_the_package_imports_at_import_time_makes_it_broken(tmp_path: Path) -> None:
    env = _cupyish(tmp_path, with_torch=True)
    (env / elf_env.SITE / "cupyish" / "__init__.py").write_text(
        "from cupyish import cusolver\n", encoding="utf-8"
    )
    for confirm in (False, True):
        r = static_results(env, confirm=confirm)["static.abi.cupyish"]
        assert r.status == "FAIL", r.reason
        assert r.evidence["impact"] == "BROKEN", r.reason
        assert r.reason.startswith("BROKEN: `import cupyish` fails ("), r.reason
        assert "its import-time imports reach cupyish.cusolver" in r.reason
    assert r.evidence["impact_from_load"] == "BROKEN"


def _bnbish(tmp_path: Path, utils_py: str) -> Path:
    """bitsandbytes 0.47.0's shape: a ctypes-loaded library, and an import-time module
    (backends/utils.py, reached through `from ..utils import x`) that imports a module the
    METADATA does not declare and the env does not have (`packaging` in a clean torch env)."""
    root = tmp_path / "env"
    site = elf_env.new_env(root)
    lib = elf_env.gcc(site / "bnbish" / "libbnbish_cuda.so", "int bnb(void){return 0;}\n")
    elf_env.add_package(site, "bnbish", [lib], requires=("numpy>=1.17",))
    (site / "bnbish" / "__init__.py").write_text(
        "import sys\nfrom .backends.cpu import ops as cpu_ops\n", encoding="utf-8"
    )
    cpu = site / "bnbish" / "backends" / "cpu"
    cpu.mkdir(parents=True)
    (site / "bnbish" / "backends" / "__init__.py").write_text("", encoding="utf-8")
    (cpu / "__init__.py").write_text("", encoding="utf-8")
    (cpu / "ops.py").write_text("import ctypes\nfrom ..utils import ipex_cpu\n", encoding="utf-8")
    (site / "bnbish" / "backends" / "utils.py").write_text(utils_py, encoding="utf-8")
    return root


UNDECLARED = '"""Docstring.\nimport notinstalled_doc\n"""\nfrom notinstalled import version\nipex_cpu = None\n'


def test_an_undeclared_import_that_fails_is_reported_as_such(tmp_path: Path) -> None:
    env = _bnbish(tmp_path, UNDECLARED)
    r = static_results(env)["static.abi.bnbish"]
    assert r.status == "FAIL", r.reason
    assert r.reason.startswith(
        "import fails: bnbish 1.0 imports notinstalled at import time "
        "(bnbish/backends/utils.py) without declaring it, and notinstalled is not installed: "
        "import bnbish: ModuleNotFoundError: No module named 'notinstalled'"
    )
    assert "notinstalled_doc" not in r.reason  # column 0, but inside a docstring
    # without loads: the static candidate, as a warning
    quiet = static_results(env, confirm=False)["static.abi.bnbish"]
    assert quiet.status == "PASS" and quiet.evidence["severity"] == "WARN", quiet.reason
    assert "imports notinstalled at import time" in quiet.reason


def test_a_guarded_import_is_not_a_finding(tmp_path: Path) -> None:
    guarded = "try:\n    from notinstalled import version\nexcept ImportError:\n    pass\n"
    env = _bnbish(tmp_path, guarded + "ipex_cpu = None\n")
    r = static_results(env)["static.abi.bnbish"]
    assert r.status == "PASS", r.reason
    assert "notinstalled" not in r.reason


@pytest.mark.parametrize(
    "utils_py",
    [
        # only for type checkers, or only when called: not at import time
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import notinstalled\n",
        "def later():\n    import notinstalled\n    return notinstalled\n",
        # every process has __main__ (dill's `import __main__`)
        "import __main__\n",
    ],
)
def test_imports_that_do_not_run_at_import_time_or_always_resolve_are_not_candidates(
    tmp_path: Path, utils_py: str
) -> None:
    env = _bnbish(tmp_path, utils_py + "ipex_cpu = None\n")
    r = static_results(env, confirm=False)["static.abi.bnbish"]
    assert r.status == "PASS" and r.evidence["severity"] != "WARN", r.reason


def test_distutils_is_judged_by_the_env_python_not_this_tools() -> None:
    """PEP 632: distutils left the standard library in 3.12 (`from distutils.version import
    LooseVersion` at import time fails there unless setuptools' _distutils_hack serves it);
    this tool may run on another Python than the env's."""
    from validators.static.imports import stdlib_names

    assert "distutils" in stdlib_names((3, 11))
    assert "distutils" not in stdlib_names((3, 12))
    assert "tomllib" not in stdlib_names((3, 10)) and "tomllib" in stdlib_names((3, 12))
    assert "telnetlib" in stdlib_names((3, 12)) and "telnetlib" not in stdlib_names((3, 13))


@pytest.mark.parametrize(("with_setuptools", "flagged"), [(False, True), (True, False)])
def test_distutils_in_a_312_env_is_a_candidate_unless_setuptools_serves_it(
    tmp_path: Path, with_setuptools: bool, flagged: bool
) -> None:
    env = _bnbish(tmp_path, "from distutils.version import LooseVersion\nipex_cpu = None\n")
    site = env / elf_env.SITE  # lib/python3.12: the env's Python is 3.12
    if with_setuptools:
        (site / "_distutils_hack").mkdir()
        (site / "_distutils_hack" / "__init__.py").write_text("", encoding="utf-8")
    r = static_results(env, confirm=False)["static.abi.bnbish"]
    assert ("imports distutils at import time" in r.reason) is flagged, r.reason
