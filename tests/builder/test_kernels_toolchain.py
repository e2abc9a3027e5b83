"""The kernel toolchain's parts with real tools: the header overlay takes only what the toolkit
lacks, the libcuda link stub is a real shared object with the driver's soname and the names
cuda.h declares, and this host's nvcc maps the build's folders out of host and device code."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from builder.kernels import toolchain


def test_the_overlay_links_only_headers_the_toolkit_lacks(tmp_path: Path) -> None:
    kit = tmp_path / "cuda" / "include"
    kit.mkdir(parents=True)
    (kit / "cuda_runtime.h").write_text("// toolkit's\n")
    site = tmp_path / "site"
    for lib, names in (("cu13", ["cuda_runtime.h", "cublasLt.h"]), ("curand", ["curand_kernel.h"])):
        inc = site / "nvidia" / lib / "include"
        inc.mkdir(parents=True)
        for name in names:
            (inc / name).write_text(f"// {lib}'s\n")
        (inc / "host").mkdir()  # a folder name that must not shadow anything
    overlay = tmp_path / "overlay"
    linked = toolchain.build_overlay(kit, toolchain.wheel_include_dirs([site]), overlay)
    assert sorted(linked) == ["cublasLt.h", "curand_kernel.h"]
    assert sorted(p.name for p in overlay.iterdir()) == ["cublasLt.h", "curand_kernel.h"]
    assert (overlay / "cublasLt.h").resolve() == site / "nvidia" / "cu13" / "include" / "cublasLt.h"


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs cc")
def test_the_link_stub_has_the_driver_soname_and_cuda_h_names(tmp_path: Path) -> None:
    home = tmp_path / "cuda"
    (home / "include").mkdir(parents=True)
    (home / "include" / "cuda.h").write_text(
        "#define cuMemAlloc cuMemAlloc_v2\n"
        "CUresult CUDAAPI cuInit(unsigned int Flags);\n"
        "CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);\n"
        "CUresult CUDAAPI cuTensorMapEncodeTiled (CUtensorMap *tensorMap);\n"
    )
    folder, how = toolchain.link_stub(home, tmp_path / "lib")
    assert how == "generated" and folder == tmp_path / "lib"
    dyn = subprocess.run(
        ["readelf", "-d", "--dyn-syms", "-W", str(folder / "libcuda.so")],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "Library soname: [libcuda.so.1]" in dyn
    for name in ("cuInit", "cuMemAlloc_v2", "cuTensorMapEncodeTiled"):
        assert f" {name}\n" in dyn or dyn.rstrip().endswith(f" {name}"), name


def test_nvcc_maps_the_build_folders_out_of_host_and_device_code(tmp_path: Path) -> None:
    home = toolchain.find_cuda_home()  # this host's nvcc (13.0 here)
    deep = tmp_path / "env" / "lib" / "site-packages" / "pkg"
    deep.mkdir(parents=True)
    source = deep / "k.cu"
    source.write_text(
        "#include <cstdio>\n"
        '__global__ void k() { printf("%s\\n", __FILE__); }\n'
        'void h() { printf("host %s\\n", __FILE__); k<<<1, 1>>>(); }\n'
    )
    chain = toolchain.Toolchain(home, toolchain.nvcc_version(home), tmp_path, (), tmp_path, "x")
    env = {**os.environ, **chain.env({tmp_path / "env": "/env"})}
    out = tmp_path / "k.o"
    subprocess.run(
        [str(home / "bin" / "nvcc"), "-c", "-gencode=arch=compute_90a,code=sm_90a", str(source),
         "-o", str(out)],
        env=env, check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    data = out.read_bytes()
    assert str(tmp_path).encode() not in data
    assert data.count(b"/env/lib/site-packages/pkg/k.cu") >= 2  # host and device strings
