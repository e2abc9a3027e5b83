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


# what nvcc-built code imports from the CUDA runtime (the fatbin fixtures' libmulti.so and
# libold.so: `nm -D --undefined-only`), each under the runtime's version node as the real
# libcudart exports them
CUDA_REGISTRATION = (
    "__cudaGetKernel", "__cudaInitModule", "__cudaLaunchKernel", "__cudaPopCallConfiguration",
    "__cudaRegisterFatBinary", "__cudaRegisterFatBinaryEnd", "__cudaRegisterFunction",
    "__cudaUnregisterFatBinary",
)  # fmt: skip


def _cudart(build: Path, major: int) -> Path:
    folder = build / f"cudart{major}"
    folder.mkdir(parents=True, exist_ok=True)
    soname = f"libcudart.so.{major}"
    source = elf_env.CUDART_C + "".join(
        f"int {n}(void) {{ return 0; }}\n" for n in CUDA_REGISTRATION
    )
    names = "; ".join(("cudaMalloc", *CUDA_REGISTRATION))
    script = elf_env.version_script(
        folder, "cudart.map", f"{soname} {{ global: {names}; local: *; }};\n"
    )
    return elf_env.gcc(folder / soname, source, f"-Wl,-soname,{soname}", script)


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
    cudart = {major: _cudart(build, major) for major in (12, 13)}
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


FATBIN = Path(__file__).resolve().parents[1] / "validators" / "fixtures" / "fatbin"

# (label, properties) of the vkern 1.0 variant wheels; the claims each one's binary bears out
# or contradicts are in tests/validators/test_compat_variants.py.
GOOD = [
    "abi_dependency :: torch :: 2.11",
    "nvidia :: cuda_version_lower_bound :: 13.0",
    "nvidia :: sm_arch :: 120_real",
    "nvidia :: sm_arch :: 120_virtual",
    "nvidia :: sm_arch :: 90_real",
]
BAD = [
    "abi_dependency :: torch :: 2.10",
    "nvidia :: cuda_version_upper_bound :: 13",
    "nvidia :: sm_arch :: 120_real",
    "nvidia :: sm_arch :: 80_real",
    "x86_64 :: level :: v3",
]


def _info() -> object:
    """The providers a real variant wheel names (nvidia's plugin, x86_64's, the built-in
    abi_dependency): variantlib refuses a variant.json without them."""
    from variantlib.models.variant_info import ProviderInfo, VariantInfo

    return VariantInfo(
        namespace_priorities=["nvidia", "x86_64", "abi_dependency"],
        providers={
            "nvidia": ProviderInfo(
                requires=["nvidia-variant-provider>=0.0.1,<1"],
                plugin_api="nvidia_variant_provider.plugin:NvidiaVariantPlugin",
            ),
            "x86_64": ProviderInfo(requires=["provider-variant-x86-64>=0.0.1"]),
            "abi_dependency": ProviderInfo(builtin="abi_dependency"),
        },
    )


def _desc(label: str, properties: list[str]) -> object:
    from variantlib.api import VariantDescription, VariantProperty

    return VariantDescription(
        properties=[VariantProperty.from_str(p) for p in properties], label=label
    )


def variant_json(label: str, properties: list[str]) -> str:
    """A wheel's variant.json as variantlib writes it (make_variant_dist_info)."""
    from variantlib.api import make_variant_dist_info

    return str(make_variant_dist_info(_desc(label, properties), _info()))


def index_variants_json(variants: dict[str, list[str]]) -> str:
    """An index's <name>-<version>-variants.json (variantlib's VariantsJson)."""
    from variantlib.variants_json import VariantsJson

    table = VariantsJson(_info())
    table.variants = {label: _desc(label, props) for label, props in variants.items()}
    return str(table.to_str())


def variant_wheels(build: Path, index_says: dict[str, list[str]]) -> list[Path]:
    """vkern 1.0 variant wheels: an extension linked against torch 2.9's c10 (the
    2.9.1/2.11.0 signatures) and libcudart.so.13, beside a real nvcc-built library:
    - `good`: libmulti.so (SASS sm_80, sm_90a, sm_100f, sm_120a; PTX compute_90, compute_120),
      claims GOOD;
    - `bad`: libold.so (SASS sm_80, sm_86 only), claims BAD;
    - `nojson`: a label in its name and no variant.json;
    and the index's vkern-1.0-variants.json with `index_says`."""
    old = elf_env.gxx(
        build / "vold" / "libc10_cuda.so", elf_env.CORE_OLD_CPP, "-Wl,-soname,libc10_cuda.so"
    )
    cudart13 = _cudart(build / "v", 13)
    kernel = elf_env.gxx(
        build / "vkernel" / "common_ops.abi3.so",
        elf_env.KERNEL_CPP,
        "-Wl,--no-as-needed",
        f"-L{old.parent}",
        "-l:libc10_cuda.so",
        f"-L{cudart13.parent}",
        "-l:libcudart.so.13",
    )
    out = build / "vwheels"

    def wheel(label: str, lib: str, props: list[str] | None) -> Path:
        return make_wheel(
            out,
            "vkern",
            "1.0",
            files={
                "vkern/common_ops.abi3.so": kernel.read_bytes(),
                f"vkern/{lib}": (FATBIN / lib).read_bytes(),
            },
            tag=TAG_KERNEL,
            deflate=True,
            variant=(label, variant_json(label, props) if props is not None else ""),
        )

    good = wheel("good", "libmulti.so", GOOD)
    bad = wheel("bad", "libold.so", BAD)
    nojson = wheel("nojson", "libold.so", None)
    table = out / "vkern-1.0-variants.json"
    table.write_text(index_variants_json(index_says), encoding="utf-8")
    return [good, bad, nojson, table]
