"""An absent DT_NEEDED library: optional backend (WARN) or a missing dependency (FAIL)?

Found on a real env (torch 2.9.1 + torchvision 0.24.1 after `pip uninstall
nvidia-cusparselt-cu12`): the static group called libcusparseLt.so.0 "optional; the package
imports without it" while `import torch` fails on it and torchvision goes down with it.
Tiny real ELF envs (gcc) and real confirming loads, as in test_static_classes.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.validators import elf_env
from tests.validators.static_run import static_results

pytestmark = pytest.mark.skipif(not elf_env.have_compilers(), reason="needs gcc and g++")

SPARSE_C = "int sparse_fn(void) { return 3; }\n"


def _core_needing_absent(site: Path, build: Path, requires: tuple[str, ...] = ()) -> Path:
    """torchish/lib/libcore.so needing libsparseish.so.0, which the env lacks (uninstalled);
    `import torchish` loads libcore.so, as `import torch` loads libtorch_cuda.so."""
    sparse = elf_env.gcc(build / "libsparseish.so.0", SPARSE_C, "-Wl,-soname,libsparseish.so.0")
    core = elf_env.gcc(
        site / "torchish" / "lib" / "libcore.so",
        "extern int sparse_fn(void);\nint core_fn(void){return sparse_fn();}\n",
        "-Wl,-soname,libcore.so",
        f"-L{sparse.parent}",
        "-l:libsparseish.so.0",
    )
    elf_env.add_package(site, "torchish", [core], requires)
    (site / "torchish" / "__init__.py").write_text(
        "import ctypes, os\n"
        "ctypes.CDLL(os.path.join(os.path.dirname(__file__), 'lib', 'libcore.so'))\n",
        encoding="utf-8",
    )
    return core


def _vision_on(site: Path, core: Path) -> Path:
    plugin = elf_env.gcc(
        site / "visionish" / "_C.so",
        "extern int core_fn(void);\nint nms(void){return core_fn();}\n",
        f"-L{core.parent}",
        "-l:libcore.so",
        f"-Wl,-rpath,{core.parent}",
    )
    elf_env.add_package(site, "visionish", [plugin], ("torchish",))
    return plugin


def _leaf_backend(tmp_path: Path) -> None:
    """ortish/capi/libprovider_trt.so needing libsparseish.so.0: a provider nothing links."""
    sparse = elf_env.gcc(
        tmp_path / "build" / "libsparseish.so.0", SPARSE_C, "-Wl,-soname,libsparseish.so.0"
    )
    site = elf_env.new_env(tmp_path / "env")
    provider = elf_env.gcc(
        site / "ortish" / "capi" / "libprovider_trt.so",
        "extern int sparse_fn(void);\nint trt(void){return sparse_fn();}\n",
        f"-L{sparse.parent}",
        "-l:libsparseish.so.0",
    )
    elf_env.add_package(site, "ortish", [provider])


def test_absent_library_below_another_package_is_not_optional(tmp_path: Path) -> None:
    site = elf_env.new_env(tmp_path / "env")
    core = _core_needing_absent(site, tmp_path / "build")
    _vision_on(site, core)
    # static evidence alone: no load ran, yet the library is not called optional
    results = static_results(tmp_path / "env", confirm=False)
    torch = results["static.abi.torchish"]
    assert torch.status == "FAIL", torch.reason
    first = torch.reason.split(" | ")[0]
    assert "libsparseish.so.0" in first and "not optional: libcore.so is below visionish" in first
    assert "the package imports without it" not in torch.reason
    assert "takes down with it: visionish 1.0" in torch.reason
    vision = results["static.abi.visionish"]
    assert vision.status == "FAIL" and "libcore.so (torchish 1.0) below them" in vision.reason
    # the confirming load agrees: `import torchish` fails on the absent library
    loaded = static_results(tmp_path / "env")["static.abi.torchish"]
    assert loaded.status == "FAIL" and "confirmed by a load" in loaded.reason
    assert "libsparseish.so.0: cannot open shared object file" in loaded.reason


def test_absent_library_of_a_required_distribution_is_not_optional(tmp_path: Path) -> None:
    """No other package depends on it, but the package requires a distribution that is not
    installed: its absent library is a missing dependency, named as such."""
    site = elf_env.new_env(tmp_path / "env")
    _core_needing_absent(site, tmp_path / "build", requires=("sparseish-cu12==0.7.1",))
    r = static_results(tmp_path / "env", confirm=False)["static.abi.torchish"]
    assert r.status == "FAIL", r.reason
    assert "not optional: torchish 1.0 requires sparseish-cu12==0.7.1, not installed" in r.reason


def test_absent_library_of_an_optional_backend_stays_a_warning(tmp_path: Path) -> None:
    """The same absent library under a leaf plugin nothing else needs and no requirement
    names (bitsandbytes' ROCm builds, onnxruntime's TensorRT provider): WARN, and the
    package's import is tried for real."""
    _leaf_backend(tmp_path)
    r = static_results(tmp_path / "env")["static.abi.ortish"]
    assert r.status == "PASS", r.reason
    assert r.evidence["severity"] == "WARN" and "not optional" not in r.reason
    assert {"step": "import ortish", "outcome": "ok", "error": ""} in r.evidence["loads"]


def test_optional_looking_library_the_import_fails_on_is_not_called_optional(
    tmp_path: Path,
) -> None:
    """Nothing static marks it needed (no dependant, no requirement), but `import` fails on
    it: FAIL, and the reason does not also claim the package imports without it."""
    site = elf_env.new_env(tmp_path / "env")
    _core_needing_absent(site, tmp_path / "build")
    r = static_results(tmp_path / "env")["static.abi.torchish"]
    assert r.status == "FAIL", r.reason
    assert r.reason.startswith("torchish 1.0: DT_NEEDED libraries found neither")
    assert "imports without it" not in r.reason
    assert "import torchish" in r.reason and "libsparseish.so.0" in r.reason


def test_warning_says_what_was_seen(tmp_path: Path) -> None:
    """'imports without it' only where an import ran; statically, the grounds of the WARN."""
    _leaf_backend(tmp_path)
    loaded = static_results(tmp_path / "env")["static.abi.ortish"].reason
    assert "import ortish works without it" in loaded
    quiet = static_results(tmp_path / "env", confirm=False)["static.abi.ortish"].reason
    assert quiet.startswith("WARN: optional:") and "works without it" not in quiet
    assert "no other package's objects need it" in quiet


def test_missing_symbols_name_the_unmet_pin_on_the_library_wheel(tmp_path: Path) -> None:
    """torch 2.13.0 forced over nvidia-nccl-cu13 2.28.9 (it pins 2.29.7): ncclCommResume is
    defined by nothing; the reason names the pin as the likely why."""
    build = tmp_path / "build"
    site = elf_env.new_env(tmp_path / "env")
    nccl = elf_env.gcc(
        site / "ncclish" / "lib" / "libnccl.so.2", SPARSE_C, "-Wl,-soname,libnccl.so.2"
    )
    elf_env.add_dist(site, "ncclish", "2.28.9", [nccl])
    newer = elf_env.gcc(
        build / "libnccl.so.2",
        SPARSE_C + "int resume_fn(void){return 1;}\n",
        "-Wl,-soname,libnccl.so.2",
    )
    core = elf_env.gcc(
        site / "torchish" / "lib" / "libcore.so",
        "extern int resume_fn(void);\nint core_fn(void){return resume_fn();}\n",
        "-Wl,-soname,libcore.so",
        f"-L{newer.parent}",
        "-l:libnccl.so.2",
        f"-Wl,-rpath,{nccl.parent}",
    )
    elf_env.add_package(site, "torchish", [core], ("ncclish==2.29.7",))
    r = static_results(tmp_path / "env", confirm=False)["static.abi.torchish"]
    assert r.status == "FAIL", r.reason
    assert "resume_fn" in r.reason
    assert "likely why: requires ncclish==2.29.7, ncclish 2.28.9 installed" in r.reason


def test_a_failing_package_names_the_packages_that_require_it(tmp_path: Path) -> None:
    """sglang 0.5.15 + torch 2.13.0 --no-deps: sglang, xgrammar, ... import torch in Python
    (no ELF link to it); when torch cannot load they go down too, and torch's FAIL names them."""
    site = elf_env.new_env(tmp_path / "env")
    core = _core_needing_absent(site, tmp_path / "build", requires=("sparseish-cu12==0.7.1",))
    _vision_on(site, core)
    (site / "servish").mkdir()
    (site / "servish" / "__init__.py").write_text("import torchish\n", encoding="utf-8")
    elf_env.add_dist(site, "servish", "1.0", [], ("torchish", 'unrelated; extra == "x"'))
    elf_env.add_dist(site, "bystander", "1.0", [], ('torchish; extra == "cuda"',))
    r = static_results(tmp_path / "env", confirm=False)["static.abi.torchish"]
    assert r.status == "FAIL", r.reason
    assert "required by 1 more (down too where they import it): servish 1.0" in r.reason
    assert r.evidence["required_by"] == ["servish 1.0"]  # visionish is named as taken down
