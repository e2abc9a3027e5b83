"""The CUDA toolchain that builds an env's kernels on a host without a GPU, and what it lacks.

A compiler-only CUDA toolkit (nvcc, cudart, the runtime headers: what `cuda-nvcc` packages and
slim CI images install) lacks two things the engines' kernels use:

- library headers: FlashInfer's common headers include `cublasLt.h` and CUTLASS's utilities
  `curand_kernel.h`. The env's own CUDA wheels (`nvidia/cu13/include`, `nvidia/cublas/include`,
  ...) have them. They are offered through an overlay folder on CPATH that links only the
  headers the toolkit does not have, so the toolkit's own headers always win (a wheel's newer
  `cuda_runtime.h` must not shadow the compiler's);
- `libcuda.so` to link `-lcuda` against: it ships with the driver, not the toolkit. A link stub
  exporting every `cu*` name the toolkit's `cuda.h` declares stands in (soname libcuda.so.1, as
  the driver's), built with the host's C compiler into the scratch folder, never into the env.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from stackgate import proc
from stackgate.errors import CommandFailed, EnvironmentProblem

_RELEASE = re.compile(r"release (\d+)\.(\d+)")
_DRIVER_NAME = re.compile(r"\b(cu[A-Z]\w*)\s*\(")


@dataclass(frozen=True)
class Toolchain:
    cuda_home: Path
    nvcc_version: str  # "13.0"
    include_overlay: Path  # folder of links to headers the toolkit lacks (may be empty)
    overlaid: tuple[str, ...]  # the names linked there
    link_dir: Path  # holds libcuda.so (the toolkit's stub or the generated one)
    link_stub: str  # "toolkit" or "generated"

    def env(self, maps: dict[Path, str] | None = None) -> dict[str, str]:
        """Variables the kernel builds run under (CUDA_HOME is read by FlashInfer, tvm-ffi
        and SGLang's arch choice alike).

        maps: folder -> the name it gets inside the built files. Headers' `__FILE__` (in
        assert and error messages) would otherwise put the build's own folders into the
        modules, and a module copied into an env elsewhere would differ from one built there.
        Every nvcc takes them through NVCC_APPEND_FLAGS (its host preprocessor serves the device
        pass too), every host-only C++ compile through CXX (FlashInfer and tvm-ffi both write
        `$cxx` into their ninja files)."""
        cpath = os.pathsep.join(
            [str(self.include_overlay), *filter(None, [os.environ.get("CPATH")])]
        )
        library_path = os.pathsep.join(
            [str(self.link_dir), *filter(None, [os.environ.get("LIBRARY_PATH")])]
        )
        pairs = [(self.cuda_home, "/cuda"), *sorted((maps or {}).items())]
        flags = [
            f"-ffile-prefix-map={folder}={name}"
            for path, name in pairs
            for folder in dict.fromkeys([path, path.resolve()])
        ]
        for flag in flags:
            if "," in flag or " " in flag:
                raise EnvironmentProblem(f"{flag}: a folder with ',' or ' ' cannot be mapped")
        return {
            "NVCC_APPEND_FLAGS": " ".join(
                [
                    *filter(None, [os.environ.get("NVCC_APPEND_FLAGS")]),
                    *(f"-Xcompiler={f}" for f in flags),
                ]
            ),
            "CXX": " ".join([os.environ.get("CXX", "c++"), *flags]),
            "CUDA_HOME": str(self.cuda_home),
            "CPATH": cpath,
            "LIBRARY_PATH": library_path,
            "FLASHINFER_EXTRA_LDFLAGS": f"-L{self.link_dir}",
        }


def find_cuda_home() -> Path:
    """CUDA_HOME / CUDA_PATH, else the toolkit of the `nvcc` on PATH (through wrapper scripts:
    the folder with both bin/nvcc and include/cuda_runtime.h), else /usr/local/cuda."""
    candidates: list[Path] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(Path(os.environ[var]))
    nvcc = shutil.which("nvcc")
    if nvcc is not None:
        candidates.append(Path(nvcc).resolve().parent.parent)
    candidates.append(Path("/usr/local/cuda"))
    for home in candidates:
        if (home / "bin" / "nvcc").is_file() and (home / "include" / "cuda_runtime.h").is_file():
            return home
    raise EnvironmentProblem(
        "no CUDA toolkit to build kernels with (nvcc and include/cuda_runtime.h)",
        details=[f"looked in: {', '.join(str(c) for c in candidates)}"],
    )


def nvcc_version(cuda_home: Path) -> str:
    try:
        out = proc.run([str(cuda_home / "bin" / "nvcc"), "--version"]).stdout
    except CommandFailed as exc:
        raise EnvironmentProblem(f"{cuda_home}/bin/nvcc --version failed: {exc}") from None
    match = _RELEASE.search(out)
    if match is None:
        raise EnvironmentProblem(f"{cuda_home}/bin/nvcc --version: no release in its output")
    return f"{match.group(1)}.{match.group(2)}"


def wheel_include_dirs(sites: list[Path]) -> list[Path]:
    """`nvidia/<lib>/include` and `nvidia/cu<N>/include` of the given site-packages, in order."""
    found: list[Path] = []
    for site in sites:
        root = site / "nvidia"
        if root.is_dir():
            found += sorted(p for p in root.glob("*/include") if p.is_dir())
    return found


def build_overlay(toolkit_include: Path, wheel_dirs: list[Path], overlay: Path) -> list[str]:
    """Link into `overlay` every top-level header file of the wheels' include folders that the
    toolkit lacks; the first wheel folder naming one wins."""
    overlay.mkdir(parents=True, exist_ok=True)
    linked: list[str] = []
    for folder in wheel_dirs:
        for entry in sorted(folder.iterdir()):
            name = entry.name
            if (toolkit_include / name).exists() or (overlay / name).exists():
                continue
            if entry.is_dir() or not name.endswith((".h", ".hpp", ".cuh", ".inl")):
                continue  # header files only: a folder named `host` or `device` would shadow
            (overlay / name).symlink_to(entry)
            linked.append(name)
    return linked


def driver_names(cuda_h: Path) -> list[str]:
    """Every `cu*` function name `cuda.h` declares (with the `_v2` forms its macros select)."""
    text = cuda_h.read_text(encoding="utf-8", errors="replace")
    return sorted(set(_DRIVER_NAME.findall(text)))


def link_stub(cuda_home: Path, out: Path) -> tuple[Path, str]:
    """The folder holding a libcuda.so to link against: the toolkit's stubs/ when it has one,
    else a generated stub in `out`."""
    for folder in (cuda_home / "lib64" / "stubs", cuda_home / "lib64"):
        if (folder / "libcuda.so").is_file():
            return folder, "toolkit"
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise EnvironmentProblem("no C compiler (cc or gcc) on PATH to build the libcuda link stub")
    out.mkdir(parents=True, exist_ok=True)
    names = driver_names(cuda_home / "include" / "cuda.h")
    source = out / "libcuda-link-stub.c"
    source.write_text(
        "/* link-time stand-in for the driver's libcuda.so: never loaded */\n"
        + "".join(f"int {n}(void) {{ return 100; }}\n" for n in names),
        encoding="utf-8",
    )
    argv = [compiler, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1"]
    try:
        proc.run([*argv, "-o", str(out / "libcuda.so"), str(source)])
    except CommandFailed as exc:
        raise EnvironmentProblem(
            f"{compiler} failed building the libcuda link stub: {exc}"
        ) from None
    return out, "generated"


def prepare(sites: list[Path], scratch: Path) -> Toolchain:
    """Find the toolkit and supply what it lacks, under `scratch` (removed by the caller)."""
    home = find_cuda_home()
    version = nvcc_version(home)
    overlay = scratch / "include"
    linked = build_overlay(home / "include", wheel_include_dirs(sites), overlay)
    link_dir, how = link_stub(home, scratch / "lib")
    return Toolchain(home, version, overlay, tuple(linked), link_dir, how)
