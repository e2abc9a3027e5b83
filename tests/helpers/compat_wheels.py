"""Real ELF wheels for the compatibility checks, built here with gcc/g++:

- torch 2.9.1: libc10_cuda.so with c10's 2.9 signatures, libcudart.so.12;
- torch 2.10.0: c10's 2.10 signatures (as c10 changed them), libcudart.so.12;
- torch 2.11.0: the 2.9 signatures but libcudart.so.13 only (a CUDA 13 build);
- sgl-kernel KERNEL_VERSION: an extension linked against the 2.9.1 libc10_cuda.so and
  libcudart.so.12;
- sgl-kernel 0.3.0: a wheel for CPython 3.9 only;
- tvlike 1.0: an extension linked against the 2.9.1 libc10_cuda.so, requiring torch==2.9.1.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.wheels import make_wheel
from tests.validators import elf_env

TAG_KERNEL = "cp310-abi3-manylinux2014_x86_64"


def compat_wheels(build: Path, kernel_version: str = "0.3.21", python: str = "3.12") -> list[Path]:
    """The wheels above; torch's and tvlike's for CPython `python` (X.Y)."""
    cp = "cp" + python.replace(".", "")
    tag_torch = f"{cp}-{cp}-manylinux_2_28_x86_64"
    old = elf_env.gxx(
        build / "old" / "libc10_cuda.so", elf_env.CORE_OLD_CPP, "-Wl,-soname,libc10_cuda.so"
    )
    new = elf_env.gxx(
        build / "new" / "libc10_cuda.so", elf_env.CORE_NEW_CPP, "-Wl,-soname,libc10_cuda.so"
    )
    cudart = {
        major: elf_env.gcc(
            build / f"cudart{major}" / f"libcudart.so.{major}",
            elf_env.CUDART_C,
            f"-Wl,-soname,libcudart.so.{major}",
        )
        for major in (12, 13)
    }
    kernel = elf_env.gxx(
        build / "kernel" / "common_ops.abi3.so",
        elf_env.KERNEL_CPP,
        "-Wl,--no-as-needed",
        f"-L{old.parent}",
        "-l:libc10_cuda.so",
        f"-L{cudart[12].parent}",
        "-l:libcudart.so.12",
    )
    tv = elf_env.gxx(
        build / "tv" / "_C.so",
        elf_env.KERNEL_CPP.replace("PyInit_common_ops", "PyInit__C"),
        "-Wl,--no-as-needed",
        f"-L{old.parent}",
        "-l:libc10_cuda.so",
    )
    out = build / "wheels"

    def torch(version: str, c10: Path, cuda: int) -> Path:
        return make_wheel(
            out,
            "torch",
            version,
            files={
                "torch/__init__.py": "",
                "torch/lib/libc10_cuda.so": c10.read_bytes(),
                f"torch/lib/libcudart.so.{cuda}": cudart[cuda].read_bytes(),
            },
            tag=tag_torch,
            deflate=True,
        )

    return [
        torch("2.9.1", old, 12),
        torch("2.10.0", new, 12),
        torch("2.11.0", old, 13),
        make_wheel(
            out,
            "sgl-kernel",
            kernel_version,
            files={"sgl_kernel/common_ops.abi3.so": kernel.read_bytes()},
            tag=TAG_KERNEL,
            deflate=True,
        ),
        make_wheel(
            out,
            "sgl-kernel",
            "0.3.0",
            files={"sgl_kernel/common_ops.abi3.so": kernel.read_bytes()},
            tag="cp39-cp39-manylinux2014_x86_64",
            deflate=True,
        ),
        make_wheel(
            out,
            "tvlike",
            "1.0",
            requires=["torch==2.9.1"],
            files={"tvlike/_C.so": tv.read_bytes()},
            tag=tag_torch,
            deflate=True,
        ),
    ]
