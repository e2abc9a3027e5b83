"""GPU arch listing from real fatbins and cubins built with nvcc 13.0 (fixtures/fatbin/make.sh)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from stackgate.manifest.loading import load_stack
from tests.validators import elf_env
from validators.elf.elf_symbols import ElfReadError
from validators.elf.fatbin import GpuCode, covers, fatbin_codes, gpu_code
from validators.static.run import StaticInputs, run_static

FIXTURES = Path(__file__).parent / "fixtures" / "fatbin"
FATBIN_LIBS = (
    "libmulti.so",
    "libold.so",
    "libcompressed.so",
    "libdata.so",
    "librodata.so",
    "libunknown.so",
    "liblto.so",
)


def labels(path: Path) -> list[str]:
    return [c.label() for c in fatbin_codes(path)]


def test_lists_sass_and_ptx_with_suffixes() -> None:
    assert labels(FIXTURES / "libmulti.so") == [
        "compute_90",
        "compute_120",
        "sm_80",
        "sm_90a",
        "sm_100f",
        "sm_120a",
    ]
    assert labels(FIXTURES / "libold.so") == ["sm_80", "sm_86"]
    # compressed entries keep their headers readable
    assert labels(FIXTURES / "libcompressed.so") == ["compute_120f", "sm_90a"]


def test_fatbins_outside_nv_fatbin_are_found() -> None:
    """cuFFT 11.2.1.3 / 11.3.0.4 keep their kernels in .data beside an sm_52 .nv_fatbin stub
    (issue 25 item 2; issue 22 item 5's false alarm): libdata.so has that shape."""
    assert labels(FIXTURES / "libdata.so") == ["compute_120", "sm_75", "sm_90"]
    assert labels(FIXTURES / "librodata.so") == ["compute_120", "sm_90"]
    # LTO IR (entry kind 8) is known and is not code a GPU runs: neither listed nor unknown
    lto = gpu_code(FIXTURES / "liblto.so")
    assert [c.label() for c in lto.codes] == ["sm_90"]
    assert lto.unknown == ()


@pytest.mark.parametrize(
    ("name", "flags"),
    [
        # cuBLASLt 12.8 keeps 443 of its fatbins in `.cask_resource` (SHF_ALLOC, large);
        # cupti 12.8's libcupti.so / libcheckpoint.so keep theirs in .rodata
        (".cask_resource", "alloc,load,data,contents"),
        (".nv_kernels", "alloc,load,readonly,data,contents"),
    ],
)
def test_fatbins_in_a_data_section_of_any_name_are_found(
    tmp_path: Path, name: str, flags: str
) -> None:
    """The section's name decides nothing: the fixture with its kernels in .data, renamed
    (objcopy: binutils, installed by .ci/bootstrap)."""
    renamed = tmp_path / "librenamed.so"
    subprocess.run(
        [
            "objcopy",
            f"--rename-section=.data={name},{flags}",
            str(FIXTURES / "libdata.so"),
            str(renamed),
        ],
        check=True,
        capture_output=True,
    )
    sections = subprocess.run(
        ["readelf", "-SW", str(renamed)], check=True, capture_output=True, text=True
    ).stdout
    assert name in sections and " .data " not in sections
    assert labels(renamed) == labels(FIXTURES / "libdata.so") == ["compute_120", "sm_75", "sm_90"]


def test_a_fatbin_the_reader_cannot_read_is_reported_not_dropped() -> None:
    scan = gpu_code(FIXTURES / "libunknown.so")
    assert [c.label() for c in scan.codes] == ["sm_75"]
    assert len(scan.unknown) == 1
    assert scan.unknown[0].endswith("header version 2")


def test_standalone_cubins() -> None:
    assert labels(FIXTURES / "k_sm_90a.cubin") == ["sm_90a"]
    assert labels(FIXTURES / "k_sm_100f.cubin") == ["sm_100f"]
    assert labels(FIXTURES / "k_sm_120.cubin") == ["sm_120"]


@pytest.mark.parametrize(
    ("code", "cc", "runs"),
    [
        (GpuCode("sass", 120, "a"), (12, 0), True),
        (GpuCode("sass", 120, "a"), (12, 1), False),  # arch-specific: exactly that CC
        (GpuCode("sass", 120, ""), (12, 1), True),  # same major, higher minor
        (GpuCode("sass", 90, ""), (10, 0), False),  # SASS never crosses a major
        (GpuCode("sass", 100, "f"), (10, 3), True),  # family
        (GpuCode("sass", 100, "f"), (12, 0), False),
        (GpuCode("ptx", 90, ""), (12, 0), True),  # PTX JITs forward
        (GpuCode("ptx", 90, "a"), (10, 0), False),
        (GpuCode("ptx", 120, "f"), (12, 1), True),
        (GpuCode("ptx", 120, ""), (9, 0), False),
        (GpuCode("sass", 120, "?"), (12, 1), False),  # unknown suffix: only the exact CC
    ],
)
def test_runs_on(code: GpuCode, cc: tuple[int, int], runs: bool) -> None:
    assert code.runs_on(*cc) is runs


def test_coverage_of_the_fixtures() -> None:
    multi = fatbin_codes(FIXTURES / "libmulti.so")
    assert [c.label() for c in covers(multi, 12, 1)] == ["compute_90", "compute_120"]
    assert covers(fatbin_codes(FIXTURES / "libold.so"), 12, 0) == []


def test_truncated_and_non_elf_files(tmp_path: Path) -> None:
    cut = tmp_path / "cut.so"
    cut.write_bytes((FIXTURES / "libmulti.so").read_bytes()[:3000])
    with pytest.raises(ElfReadError):
        fatbin_codes(cut)
    text = tmp_path / "text.so"
    text.write_text("not elf")
    with pytest.raises(ElfReadError):
        fatbin_codes(text)


def _arch_env(tmp_path: Path) -> Path:
    site = elf_env.new_env(tmp_path / "env")
    placed = {}
    for pkg, name in (("kern", "libmulti.so"), ("oldkern", "libold.so")):
        target = site / pkg / name
        target.parent.mkdir(parents=True)
        shutil.copy2(FIXTURES / name, target)
        placed[pkg] = target
    elf_env.add_dist(site, "kern", "1.0", [placed["kern"]])
    elf_env.add_dist(site, "oldkern", "1.0", [placed["oldkern"]])
    cubins = site / "cubinpkg" / "cubins"
    cubins.mkdir(parents=True)
    shutil.copy2(FIXTURES / "k_sm_100f.cubin", cubins / "k_sm_100f.cubin")
    elf_env.add_dist(site, "cubinpkg", "1.0", [])
    return tmp_path / "env"


def test_arch_group_per_distribution(tmp_path: Path) -> None:
    env = _arch_env(tmp_path)
    results = {r.check: r for r in run_static(StaticInputs(env_path=env, targets=("12.0a",)))}
    assert results["static.arch.kern"].status == "PASS"
    assert "sm_120a" in results["static.arch.kern"].reason
    old = results["static.arch.oldkern"]
    assert old.status == "FAIL"
    assert "no SASS that runs on 12.0a and no PTX" in old.reason
    assert old.evidence["libraries"] == {"oldkern/libold.so": ["sm_80", "sm_86"]}
    # a cubin-only package without sm_120 code fails only when a profile needs prebuilt cubins
    assert results["static.arch.cubinpkg"].status == "PASS"
    assert "no serving profile selects one" in results["static.arch.cubinpkg"].reason


def _kernel_env(tmp_path: Path, libs: dict[str, str]) -> Path:
    """One distribution per fixture library: {dist name: fixture file}."""
    site = elf_env.new_env(tmp_path / "env")
    for dist, name in libs.items():
        target = site / dist / "lib" / name
        target.parent.mkdir(parents=True)
        shutil.copy2(FIXTURES / name, target)
        elf_env.add_dist(site, dist, "1.0", [target])
    return tmp_path / "env"


def test_kernels_in_data_cover_the_target_and_unknown_code_is_undecided(tmp_path: Path) -> None:
    env = _kernel_env(
        tmp_path, {"cufftish": "libdata.so", "oddkern": "libunknown.so", "oldkern": "libold.so"}
    )
    results = {r.check: r for r in run_static(StaticInputs(env_path=env, targets=("9.0",)))}
    cufft = results["static.arch.cufftish"]
    assert cufft.status == "PASS", cufft.reason
    assert "covers 9.0 (has compute_120, sm_75, sm_90)" in cufft.reason
    odd = results["static.arch.oddkern"]
    assert odd.status == "SKIP", odd.reason
    assert odd.evidence["severity"] == "UNDECIDED"
    assert odd.reason.startswith("UNDECIDED: oddkern 1.0 has no SASS that runs on 9.0")
    assert "oddkern/lib/libunknown.so: fatbin at 0x4078: header version 2" in odd.reason
    assert odd.evidence["unknown_gpu_code"] == {
        "oddkern/lib/libunknown.so": ["fatbin at 0x4078: header version 2"]
    }
    # a library with only readable code for other GPUs stays a FAIL
    assert results["static.arch.oldkern"].status == "FAIL"
    # where the readable code covers the target, the unreadable part decides nothing
    on_turing = {r.check: r for r in run_static(StaticInputs(env_path=env, targets=("7.5",)))}
    assert on_turing["static.arch.oddkern"].status == "PASS"


def test_cubin_package_fails_when_a_trtllm_backend_is_selected(tmp_path: Path) -> None:
    env = _arch_env(tmp_path)
    manifest = load_stack("cu130").manifest
    profile = manifest.serving["kimi-k25-tp8"].model_copy(
        update={"attention_backend": "trtllm_mla"}
    )
    manifest = manifest.model_copy(update={"serving": {"kimi-k25-tp8": profile}})
    results = {
        r.check: r
        for r in run_static(StaticInputs(env_path=env, manifest=manifest, targets=("12.0a",)))
    }
    assert results["static.arch.cubinpkg"].status == "FAIL"


@pytest.mark.skipif(
    shutil.which("nvcc") is None, reason="nvcc not installed (the fixtures are committed)"
)
def test_fixtures_match_a_fresh_nvcc_build(tmp_path: Path) -> None:
    work = tmp_path / "fatbin"
    shutil.copytree(FIXTURES, work)
    for f in work.glob("*.so"):
        f.unlink()
    subprocess.run(["bash", str(work / "make.sh")], check=True, capture_output=True)
    for name in FATBIN_LIBS:
        assert labels(work / name) == labels(FIXTURES / name)


def _arch_named_env(tmp_path: Path, dist: str) -> Path:
    """A package whose only GPU library is named for the arch it was built for, like
    tokenspeed-mla's cute_dsl_fmha_..._sm_100a_x86_64.so (here: libold.so's sm_80/sm_86)."""
    site = elf_env.new_env(tmp_path / "env")
    target = site / dist.replace("-", "_") / "fmha_bf16_sm_80_x86_64.so"
    target.parent.mkdir(parents=True)
    shutil.copy2(FIXTURES / "libold.so", target)
    elf_env.add_dist(site, dist, "1.0", [target])
    return tmp_path / "env"


def test_kernels_named_for_other_gpus_are_not_a_failure_unless_pinned(tmp_path: Path) -> None:
    env = _arch_named_env(tmp_path / "a", "mlaish")
    r = {c.check: c for c in run_static(StaticInputs(env_path=env, targets=("12.0a",)))}
    mla = r["static.arch.mlaish"]
    assert mla.status == "PASS", mla.reason
    assert "not needed by the stack on 12.0a" in mla.reason
    assert "named for the GPU it was built for (sm_80)" in mla.reason
    # the same file under a package the stack pins: the stack needs it on its GPU
    manifest = load_stack("cu130").manifest
    assert "sgl-kernel" in manifest.packages
    env = _arch_named_env(tmp_path / "b", "sgl-kernel")
    inputs = StaticInputs(env_path=env, manifest=manifest, targets=("12.0a",))
    pinned = {c.check: c for c in run_static(inputs)}["static.arch.sgl_kernel"]
    assert pinned.status == "FAIL", pinned.reason
