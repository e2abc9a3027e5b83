"""Tiny real ELF environments built with gcc/g++ for the static checks.

Each "environment" is a folder shaped like a venv (bin/python, lib/python3.12/site-packages)
holding real shared objects and dist-info folders whose RECORD lists them, so the checks see
what they see in a real env: DT_NEEDED, RPATH/RUNPATH, GNU symbol versions, weak symbols,
C++ mangled names. Sources are written by the functions below; nothing is prebuilt.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

SITE = Path("lib") / "python3.12" / "site-packages"

VERS_C = """
int foo_v1(void) { return 1; }
int foo_v2(void) { return 2; }
int bar(void) { return 3; }
__attribute__((weak)) int weak_def(void) { return 4; }
__asm__(".symver foo_v1,foo@VERS_1");
__asm__(".symver foo_v2,foo@@VERS_2");
"""
VERS_MAP = """
VERS_1 { global: foo; bar; weak_def; local: *; };
VERS_2 { global: foo; } VERS_1;
"""
VERS_OLD_C = "int foo(void) { return 1; }\nint bar(void) { return 3; }\n"
VERS_OLD_MAP = "VERS_1 { global: foo; bar; local: *; };\n"
EXT_C = """
extern int foo(void);
extern int bar(void);
extern int maybe_there(void) __attribute__((weak));
int PyInit__ext(void) { return foo() + bar() + (maybe_there ? maybe_there() : 0); }
"""
# A C++ "torch": two releases whose functions changed signature, like c10 2.9 -> 2.10.
CORE_OLD_CPP = """
namespace c10 { namespace cuda {
void c10_cuda_check_implementation(int err, const char* file, const char* fn, int line, bool x) {}
} struct MessageLogger { MessageLogger(const char* f, int l, int s); };
MessageLogger::MessageLogger(const char* f, int l, int s) {} }
"""
CORE_NEW_CPP = """
namespace c10 { namespace cuda {
void c10_cuda_check_implementation(int err, const char* file, const char* fn, unsigned int line, bool x) {}
} struct MessageLogger { MessageLogger(const char* f, int l, int s, bool b); };
MessageLogger::MessageLogger(const char* f, int l, int s, bool b) {} }
"""
KERNEL_CPP = """
namespace c10 { namespace cuda {
void c10_cuda_check_implementation(int err, const char* file, const char* fn, int line, bool x);
} struct MessageLogger { MessageLogger(const char* f, int l, int s); }; }
extern "C" int PyInit_common_ops(void) {
  c10::cuda::c10_cuda_check_implementation(0, "f", "g", 1, true);
  c10::MessageLogger m("f", 1, 2);
  return 0;
}
"""
CUDART_C = "int cudaMalloc(void) { return 0; }\n"
CUDART_MAP = "libcudart.so.12 { global: cudaMalloc; local: *; };\n"
LIBCUDA_C = "int cuInit(unsigned f) { return 0; }\n"
CUDA_EXT_C = """
extern int cudaMalloc(void);
extern int cuInit(unsigned);
int PyInit_cuda_ext(void) { return cudaMalloc() + cuInit(0); }
"""


def _cc(compiler: str, out: Path, source: str, suffix: str, *args: str) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_name(out.name + suffix)
    src.write_text(source, encoding="utf-8")
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O0", "-o", str(out), str(src), *args],
        check=True,
        capture_output=True,
        text=True,
    )
    src.unlink()
    return out


def gcc(out: Path, source: str, *args: str) -> Path:
    return _cc("gcc", out, source, ".c", *args)


def gxx(out: Path, source: str, *args: str) -> Path:
    return _cc("g++", out, source, ".cpp", *args)


def version_script(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return f"-Wl,--version-script={path}"


def new_env(root: Path) -> Path:
    """An empty venv-shaped folder whose bin/python is this interpreter."""
    (root / "bin").mkdir(parents=True, exist_ok=True)
    (root / SITE).mkdir(parents=True, exist_ok=True)
    python = root / "bin" / "python"
    if not python.exists():
        python.symlink_to(sys.executable)
    return root / SITE


def add_dist(
    site: Path, name: str, version: str, files: list[Path], requires: tuple[str, ...] = ()
) -> None:
    """dist-info with METADATA and a RECORD naming `files` (paths inside site)."""
    dist_info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    dist_info.mkdir(parents=True, exist_ok=True)
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Requires-Dist: {r}" for r in requires]
    (dist_info / "METADATA").write_text("\n".join(meta) + "\n", encoding="utf-8")
    rows = [f"{f.relative_to(site)},," for f in files] + [f"{dist_info.name}/RECORD,,"]
    (dist_info / "RECORD").write_text("\n".join(rows) + "\n", encoding="utf-8")


def add_package(site: Path, name: str, files: list[Path], requires: tuple[str, ...] = ()) -> None:
    """An importable package folder `name` (empty __init__.py) and its dist-info 1.0 naming
    `files`."""
    (site / name).mkdir(parents=True, exist_ok=True)
    (site / name / "__init__.py").write_text("", encoding="utf-8")
    add_dist(site, name, "1.0", files, requires)


def torch_like(site: Path, build: Path, version: str, cpp: str) -> Path:
    lib = gxx(site / "torch" / "lib" / "libc10_cuda.so", cpp, "-Wl,-soname,libc10_cuda.so")
    add_dist(site, "torch", version, [lib])
    return lib


def kernel_against(site: Path, build: Path, link_lib: Path) -> Path:
    """An sgl-kernel-like extension linked against `link_lib` with no RPATH (like the real one)."""
    ext = gxx(
        site / "sgl_kernel" / "sm100" / "common_ops.abi3.so",
        KERNEL_CPP,
        f"-L{link_lib.parent}",
        "-l:libc10_cuda.so",
    )
    add_dist(site, "sgl-kernel", "0.3.21", [ext])
    return ext


def versioned_pair(site: Path, build: Path, *, old_provider: bool) -> tuple[Path, Path]:
    """provider/lib/libvers.so.1 (VERS_1 + VERS_2, or VERS_1 only) and an extension that was
    linked against the VERS_2 one (imports foo@VERS_2, bar@VERS_1, weak maybe_there)."""
    build.mkdir(parents=True, exist_ok=True)
    new_lib = gcc(
        build / "libvers.so.1",
        VERS_C,
        "-Wl,-soname,libvers.so.1",
        version_script(build, "vers.map", VERS_MAP),
    )
    lib_dir = site / "provider" / "lib"
    lib_dir.mkdir(parents=True, exist_ok=True)
    if old_provider:
        lib = gcc(
            lib_dir / "libvers.so.1",
            VERS_OLD_C,
            "-Wl,-soname,libvers.so.1",
            version_script(build, "vers_old.map", VERS_OLD_MAP),
        )
        add_dist(site, "provider", "0.9", [lib])
    else:
        lib = lib_dir / "libvers.so.1"
        shutil.copy2(new_lib, lib)
        add_dist(site, "provider", "1.0", [lib])
    ext = gcc(
        site / "consumer" / "_ext.cpython-312-x86_64-linux-gnu.so",
        EXT_C,
        f"-L{build}",
        "-l:libvers.so.1",
        "-Wl,-rpath,$ORIGIN/../provider/lib",
        "-Wl,--disable-new-dtags",
    )
    add_dist(site, "consumer", "1.0", [ext])
    return lib, ext


def cuda12_beside_cuda13(site: Path, build: Path) -> Path:
    """An extension needing libcudart.so.12 (versioned) and libcuda.so.1, in an env that ships
    only libcudart.so.13 and, like every env, no driver."""
    build.mkdir(parents=True, exist_ok=True)
    cudart12 = gcc(
        build / "libcudart.so.12",
        CUDART_C,
        "-Wl,-soname,libcudart.so.12",
        version_script(build, "cudart.map", CUDART_MAP),
    )
    libcuda = gcc(build / "libcuda.so.1", LIBCUDA_C, "-Wl,-soname,libcuda.so.1")
    ext = gcc(
        site / "kern12" / "cuda_ext.abi3.so",
        CUDA_EXT_C,
        f"-L{build}",
        "-l:libcudart.so.12",
        "-l:libcuda.so.1",
    )
    add_dist(site, "kern12", "1.0", [ext])
    cudart13 = gcc(
        site / "nvidia" / "cuda_runtime" / "lib" / "libcudart.so.13",
        CUDART_C,
        "-Wl,-soname,libcudart.so.13",
    )
    add_dist(site, "nvidia-cuda-runtime", "13.0.96", [cudart13])
    assert cudart12.exists() and libcuda.exists()
    return ext


def have_compilers() -> bool:
    return shutil.which("gcc") is not None and shutil.which("g++") is not None


def env_vars_without_ld_path() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
