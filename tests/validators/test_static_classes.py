"""Issue 17's classes on tiny real ELF environments (gcc), with real confirming loads.

Each env is venv-shaped (bin/python is this interpreter), so the confirming load runs a real
child process that imports the fake packages and dlopens their objects.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.validators import elf_env
from tests.validators.static_run import static_results
from validators.static.driver_stub import build_stubs, driver_names

pytestmark = pytest.mark.skipif(not elf_env.have_compilers(), reason="needs gcc and g++")

PROVIDER_C = "int core_fn(void) { return 1; }\n"
NEEDS_CORE_C = "extern int core_fn(void);\nint {name}(void) {{ return core_fn(); }}\n"
NEEDS_GONE_C = "extern int gone_fn(void);\nint {name}(void) {{ return gone_fn(); }}\n"
CRASH_C = """
#include <signal.h>
#include <stdlib.h>
__attribute__((constructor)) static void boom(void) { %s; }
int PyInit_%s(void) { return 0; }
"""


def _torch_like(site: Path) -> Path:
    """torch/lib/libcore.so defining core_fn, shipped by a distribution named torch."""
    lib = elf_env.gcc(site / "torch" / "lib" / "libcore.so", PROVIDER_C, "-Wl,-soname,libcore.so")
    elf_env.add_package(site, "torch", [lib])
    # like `import torch`: its libraries are in the process before any extension loads
    (site / "torch" / "__init__.py").write_text(
        "import ctypes, os\n"
        "ctypes.CDLL(os.path.join(os.path.dirname(__file__), 'lib', 'libcore.so'))\n",
        encoding="utf-8",
    )
    return lib


def test_optional_library_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    """numba's tbbpool needing libtbb.so.12 from the optional tbb package."""
    build = tmp_path / "build"
    missing = elf_env.gcc(
        build / "libtbbish.so.12", "int tbb_fn(void){return 1;}\n", "-Wl,-soname,libtbbish.so.12"
    )
    site = elf_env.new_env(tmp_path / "env")
    ext = elf_env.gcc(
        site / "numbaish" / "tbbpool.cpython-312-x86_64-linux-gnu.so",
        "extern int tbb_fn(void);\nint PyInit_tbbpool(void){return tbb_fn();}\n",
        f"-L{missing.parent}",
        "-l:libtbbish.so.12",
    )
    elf_env.add_package(site, "numbaish", [ext])
    results = static_results(tmp_path / "env")
    r = results["static.abi.numbaish"]
    assert r.status == "PASS", r.reason
    assert r.evidence["severity"] == "WARN"
    assert r.reason.startswith("WARN: optional:")
    assert "libtbbish.so.12" in r.reason
    # the import of the package was tried for real, and worked
    assert {"step": "import numbaish", "outcome": "ok", "error": ""} in r.evidence["loads"]


def test_plugin_without_pyinit_is_symbol_checked_and_confirmed(tmp_path: Path) -> None:
    """torchvision/_C.so (torch.ops.load_library, no PyInit_) importing a symbol the installed
    torch no longer defines: FAIL, with the static symbol and ld.so's error."""
    build = tmp_path / "build"
    old = elf_env.gcc(
        build / "libcore.so",
        PROVIDER_C + "int gone_fn(void){return 2;}\n",
        "-Wl,-soname,libcore.so",
    )
    site = elf_env.new_env(tmp_path / "env")
    _torch_like(site)
    plugin = elf_env.gcc(
        site / "visionish" / "_C.so",
        NEEDS_GONE_C.format(name="nms"),
        f"-L{old.parent}",
        "-l:libcore.so",
    )
    elf_env.add_package(site, "visionish", [plugin])
    results = static_results(tmp_path / "env")
    r = results["static.abi.visionish"]
    assert r.status == "FAIL", r.reason
    assert "gone_fn" in r.reason
    assert "confirmed by a load: visionish/_C.so" in r.reason
    assert "undefined symbol: gone_fn" in r.reason
    assert r.evidence["failing_objects"] == [str(plugin)]
    # static evidence alone, without the load
    quiet = static_results(tmp_path / "env", confirm=False)["static.abi.visionish"]
    assert quiet.status == "FAIL" and "confirmed" not in quiet.reason


def test_symbols_the_package_scope_provides_are_not_missing(tmp_path: Path) -> None:
    """cuda-core's _tensor_bridge: aoti_torch_* from torch, no DT_NEEDED (torch._C is loaded
    RTLD_GLOBAL by the package first)."""
    site = elf_env.new_env(tmp_path / "env")
    _torch_like(site)
    ext = elf_env.gcc(
        site / "coreish" / "_tensor_bridge.cpython-312-x86_64-linux-gnu.so",
        "extern int core_fn(void);\nint PyInit__tensor_bridge(void){return core_fn();}\n",
    )
    elf_env.add_package(site, "coreish", [ext])
    results = static_results(tmp_path / "env")
    r = results["static.abi.coreish"]
    assert r.status == "PASS" and r.evidence["severity"] == "PASS", r.reason
    assert results["static.abi.summary"].evidence["resolved_in_package_scope"] == 1


def test_module_for_another_python_is_info(tmp_path: Path) -> None:
    site = elf_env.new_env(tmp_path / "env")
    ext = elf_env.gcc(
        site / "oldpy" / "_m.cpython-310-x86_64-linux-gnu.so",
        NEEDS_GONE_C.format(name="PyInit__m"),
    )
    elf_env.add_package(site, "oldpy", [ext])
    r = static_results(tmp_path / "env")["static.abi.oldpy"]
    assert r.status == "PASS", r.reason
    assert r.evidence["severity"] == "INFO"
    assert "another Python ABI" in r.reason and "_m.cpython-310" in r.reason


@pytest.mark.parametrize(
    ("action", "signal"), [("raise(SIGSEGV)", "SIGSEGV"), ("abort()", "SIGABRT")]
)
def test_crash_at_load_is_found_by_deep_loads(tmp_path: Path, action: str, signal: str) -> None:
    """torchvision 0.23 beside torch 2.9.1: every symbol resolves, a static initialiser dies."""
    site = elf_env.new_env(tmp_path / "env")
    ext = elf_env.gcc(
        site / "crashy" / "_ops.cpython-312-x86_64-linux-gnu.so", CRASH_C % (action, "_ops")
    )
    elf_env.add_package(site, "crashy", [ext])
    assert static_results(tmp_path / "env")["static.abi.crashy"].status == "PASS"  # nothing static
    r = static_results(tmp_path / "env", deep=True)["static.abi.crashy"]
    assert r.status == "FAIL", r.reason
    assert r.reason.startswith(f"crashes at load ({signal}): crashy/_ops.cpython-312")
    assert r.evidence["failing_objects"] == [str(ext)]


def test_unmet_requirement_on_a_linked_package_triggers_a_load(tmp_path: Path) -> None:
    """Without --deep: a package requiring another torch than the installed one is loaded."""
    site = elf_env.new_env(tmp_path / "env")
    _torch_like(site)
    ext = elf_env.gcc(
        site / "visionish" / "_ops.cpython-312-x86_64-linux-gnu.so",
        CRASH_C % ("raise(SIGSEGV)", "_ops"),
    )
    elf_env.add_package(site, "visionish", [ext], requires=("torch==0.9",))
    r = static_results(tmp_path / "env")["static.abi.visionish"]
    assert r.status == "FAIL", r.reason
    assert "crashes at load (SIGSEGV)" in r.reason


def test_root_cause_first_and_taken_down_packages_named(tmp_path: Path) -> None:
    """torchaudio 2.8 beside torch 2.9.1: the missing torch symbol before the absent FFmpeg
    libraries; and a library whose provider lacks a symbol takes its dependants down."""
    build = tmp_path / "build"
    old = elf_env.gcc(
        build / "libcore.so",
        PROVIDER_C + "int gone_fn(void){return 2;}\n",
        "-Wl,-soname,libcore.so",
    )
    ffmpeg = elf_env.gcc(
        build / "libavish.so.58", "int av_fn(void){return 1;}\n", "-Wl,-soname,libavish.so.58"
    )
    site = elf_env.new_env(tmp_path / "env")
    _torch_like(site)
    lib = elf_env.gcc(
        site / "audioish" / "lib" / "libaudioish.so",
        NEEDS_GONE_C.format(name="audio_fn"),
        "-Wl,-soname,libaudioish.so",
        f"-L{old.parent}",
        "-l:libcore.so",
    )
    ff = elf_env.gcc(
        site / "audioish" / "lib" / "_ffmpeg4.so",
        "extern int av_fn(void);\nint ff(void){return av_fn();}\n",
        f"-L{ffmpeg.parent}",
        "-l:libavish.so.58",
    )
    ext = elf_env.gcc(
        site / "audioish" / "_audio.cpython-312-x86_64-linux-gnu.so",
        "extern int audio_fn(void);\nint PyInit__audio(void){return audio_fn();}\n",
        f"-L{lib.parent}",
        "-l:libaudioish.so",
        "-Wl,-rpath,$ORIGIN/lib",
    )
    elf_env.add_package(site, "audioish", [lib, ff, ext])
    user = elf_env.gcc(
        site / "userish" / "_u.cpython-312-x86_64-linux-gnu.so",
        "extern int audio_fn(void);\nint PyInit__u(void){return audio_fn();}\n",
        f"-L{lib.parent}",
        "-l:libaudioish.so",
        f"-Wl,-rpath,{lib.parent}",
    )
    elf_env.add_package(site, "userish", [user])
    results = static_results(tmp_path / "env")
    audio = results["static.abi.audioish"]
    assert audio.status == "FAIL", audio.reason
    first, *rest = audio.reason.split(" | ")
    assert "gone_fn" in first and "libavish" not in first
    assert any(part.startswith("WARN optional:") and "libavish.so.58" in part for part in rest)
    assert "takes down with it: userish 1.0" in audio.reason
    user_r = results["static.abi.userish"]
    assert user_r.status == "FAIL", user_r.reason
    assert "libaudioish.so (audioish 1.0) below them cannot" in user_r.reason


def test_driver_stub_exports_the_imported_names(tmp_path: Path) -> None:
    names = driver_names(["cuInit", "cuDeviceGet", "nvmlInit_v2", "malloc", "cudaMalloc"])
    assert names == {
        "libcuda.so.1": ["cuDeviceGet", "cuInit"],
        "libnvidia-ml.so.1": ["nvmlInit_v2"],
    }
    stubs = build_stubs(["cuInit", "nvmlInit_v2"], cache=tmp_path)
    from validators.elf.elf_symbols import read_elf

    cuda = read_elf(stubs.folder / "libcuda.so.1")
    assert cuda.soname == "libcuda.so.1" and "cuInit" in cuda.exports
    assert "nvmlInit_v2" in read_elf(stubs.folder / "libnvidia-ml.so.1").exports
    # cached: the same names give the same folder without compiling again
    assert build_stubs(["nvmlInit_v2", "cuInit"], cache=tmp_path).folder == stubs.folder
    assert shutil.which("gcc") or shutil.which("cc")


def _record_hash(path: Path) -> str:
    import base64
    import hashlib

    digest = hashlib.sha256(path.read_bytes()).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).decode().rstrip("=")


def test_extension_overwritten_by_another_distribution_fails(tmp_path: Path) -> None:
    """cuda-python 12.6.2.post1 and cuda-bindings 13.5.0 both install
    cuda/bindings/_internal/utils.so; the later install wins and the other's modules break."""
    build = tmp_path / "build"
    ours = elf_env.gcc(build / "ours.so", "int PyInit_utils(void){return 1;}\n")
    site = elf_env.new_env(tmp_path / "env")
    theirs = elf_env.gcc(
        site / "bind" / "utils.cpython-312-x86_64-linux-gnu.so",
        "int PyInit_utils(void){return 2;}\n",
    )
    rel = theirs.relative_to(site)
    for name, digest in (("bindings", _record_hash(ours)), ("oldpython", _record_hash(theirs))):
        info = site / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        (info / "RECORD").write_text(f"{rel},{digest},1\n")
    results = static_results(tmp_path / "env", confirm=False)
    r = results["static.abi.bindings.files"]
    assert r.status == "FAIL"
    assert "bind/utils.cpython-312-x86_64-linux-gnu.so is oldpython 1.0's copy" in r.reason
    assert "static.abi.oldpython.files" not in results
