"""Symbol-level ABI checks on real shared objects built here with gcc/g++."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.validators import elf_env
from validators.elf.elf_symbols import ElfReadError, Import, read_elf, satisfies
from validators.static.abi_check import AbiChecker, mangled_stem
from validators.static.environment import load_environment
from validators.static.run import StaticInputs, run_static

pytestmark = pytest.mark.skipif(not elf_env.have_compilers(), reason="needs gcc and g++")


def _by_check(results: list) -> dict:  # type: ignore[type-arg]
    return {r.check: r for r in results}


def test_reads_versions_weak_and_needed(tmp_path: Path) -> None:
    site = elf_env.new_env(tmp_path / "env")
    lib, ext = elf_env.versioned_pair(site, tmp_path / "build", old_provider=False)
    provider = read_elf(lib)
    assert provider.soname == "libvers.so.1"
    assert {"VERS_1", "VERS_2"} <= provider.version_defs
    # foo is defined twice: foo@VERS_1 (hidden, old) and foo@@VERS_2 (default)
    assert len(provider.multi["foo"]) == 2
    consumer = read_elf(ext)
    assert consumer.needed[0] == "libvers.so.1"
    assert consumer.rpath == ("$ORIGIN/../provider/lib",)
    assert consumer.runpath == ()
    imports = {i.name: i for i in consumer.imports}
    assert imports["foo"].version == "VERS_2" and imports["foo"].version_file == "libvers.so.1"
    assert imports["bar"].version == "VERS_1"
    assert imports["maybe_there"].weak
    assert consumer.exports_python_module()


def test_versioned_lookup_rules(tmp_path: Path) -> None:
    site = elf_env.new_env(tmp_path / "env")
    lib, _ = elf_env.versioned_pair(site, tmp_path / "build", old_provider=False)
    provider = read_elf(lib)
    assert satisfies(provider, Import("foo", "VERS_2"))
    assert satisfies(provider, Import("foo", "VERS_1"))  # the old, hidden one still binds
    assert not satisfies(provider, Import("foo", "VERS_3"))
    assert satisfies(provider, Import("foo"))  # unversioned takes the default foo@@VERS_2
    assert not satisfies(provider, Import("nothere"))


def test_env_with_matching_provider_passes(tmp_path: Path) -> None:
    site = elf_env.new_env(tmp_path / "env")
    elf_env.versioned_pair(site, tmp_path / "build", old_provider=False)
    results = _by_check(run_static(StaticInputs(env_path=tmp_path / "env", targets=())))
    assert results["static.abi.consumer"].status == "PASS", results["static.abi.consumer"].reason
    # the weak maybe_there, defined nowhere, is not a failure
    assert all(r.status != "FAIL" for r in results.values())


def test_older_provider_misses_version_node_and_symbol(tmp_path: Path) -> None:
    site = elf_env.new_env(tmp_path / "env")
    elf_env.versioned_pair(site, tmp_path / "build", old_provider=True)
    results = _by_check(run_static(StaticInputs(env_path=tmp_path / "env", targets=())))
    consumer = results["static.abi.consumer"]
    assert consumer.status == "FAIL"
    assert "version VERS_2 not found in libvers.so.1" in consumer.reason
    missing = consumer.evidence["missing_symbols"]
    assert [m["symbol"] for m in missing] == ["foo"]
    assert missing[0]["version"] == "VERS_2"
    assert missing[0]["provider_package"] == "provider 0.9"
    assert (
        "consumer 1.0 was built against another provider than the installed provider 0.9"
        in consumer.reason
    )


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="needs binutils c++filt")
def test_cpp_abi_break_names_both_packages_demangled(tmp_path: Path) -> None:
    """The torch 2.9 -> 2.10 shape: the kernel was linked against the old signatures."""
    build = tmp_path / "build"
    old_site = elf_env.new_env(tmp_path / "old")
    old_lib = elf_env.torch_like(old_site, build, "2.9.1", elf_env.CORE_OLD_CPP)
    elf_env.kernel_against(old_site, build, old_lib)
    old = _by_check(run_static(StaticInputs(env_path=tmp_path / "old", targets=())))
    assert old["static.abi.sgl_kernel"].status == "PASS", old["static.abi.sgl_kernel"].reason

    new_site = elf_env.new_env(tmp_path / "new")
    elf_env.torch_like(new_site, build, "2.10.0", elf_env.CORE_NEW_CPP)
    ext = new_site / "sgl_kernel" / "sm100" / "common_ops.abi3.so"
    ext.parent.mkdir(parents=True)
    shutil.copy2(old_site / "sgl_kernel" / "sm100" / "common_ops.abi3.so", ext)
    elf_env.add_dist(new_site, "sgl-kernel", "0.3.21", [ext])
    new = _by_check(run_static(StaticInputs(env_path=tmp_path / "new", targets=())))
    kernel = new["static.abi.sgl_kernel"]
    assert kernel.status == "FAIL"
    assert kernel.reason.startswith(
        "sgl-kernel 0.3.21 was built against another torch than the installed torch 2.10.0"
    )
    symbols = {m["symbol"]: m for m in kernel.evidence["missing_symbols"]}
    check = "c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool)"
    assert set(symbols) == {check, "c10::MessageLogger::MessageLogger(char const*, int, int)"}
    assert symbols[check]["expected_from"] == "libc10_cuda.so"
    assert symbols[check]["exported_instead"] == [
        "c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, unsigned int, bool)"
    ]


def test_cuda12_soname_beside_cuda13_and_host_provided_driver(tmp_path: Path) -> None:
    site = elf_env.new_env(tmp_path / "env")
    elf_env.cuda12_beside_cuda13(site, tmp_path / "build")
    results = _by_check(run_static(StaticInputs(env_path=tmp_path / "env", targets=())))
    kern = results["static.abi.kern12"]
    assert kern.status == "FAIL"
    assert "library path: libcudart.so.12; needed by cuda_ext.abi3.so" in kern.reason
    # the confirming load (a child of the env's python) says the same, with ld.so's words
    assert "confirmed by a load: kern12/cuda_ext.abi3.so" in kern.reason
    assert "libcudart.so.12: cannot open shared object file" in kern.reason
    assert "libcudart.so.12 missing but the env has libcudart.so.13" in kern.reason
    # libcuda.so.1 is the driver's: absent here, not an ABI failure, said in the summary
    assert "libcuda.so.1" not in kern.reason
    summary = results["static.abi.summary"]
    assert summary.evidence["host_provided_sonames_absent"] == ["libcuda.so.1"]
    assert summary.evidence["driver_symbols_not_checkable"] == 1  # cuInit


def test_truncated_elf_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    site = elf_env.new_env(tmp_path / "env")
    _, ext = elf_env.versioned_pair(site, tmp_path / "build", old_provider=False)
    broken = site / "consumer" / "_broken.cpython-312-x86_64-linux-gnu.so"
    broken.write_bytes(ext.read_bytes()[:200])
    with pytest.raises(ElfReadError):
        read_elf(broken)
    results = _by_check(run_static(StaticInputs(env_path=tmp_path / "env", targets=())))
    assert results["static.abi.unreadable"].status == "ERROR"
    assert "_broken" in results["static.abi.unreadable"].reason
    assert results["static.abi.consumer"].status == "PASS"


def test_unreadable_file_is_an_error(tmp_path: Path) -> None:
    site = elf_env.new_env(tmp_path / "env")
    _, ext = elf_env.versioned_pair(site, tmp_path / "build", old_provider=False)
    with pytest.raises(ElfReadError):
        read_elf(tmp_path / "nope.so")
    directory_named_so = site / "consumer" / "dir.so"
    directory_named_so.mkdir()
    env = load_environment(tmp_path / "env")
    assert directory_named_so not in env.shared_objects()
    assert ext in env.shared_objects()


def test_runpath_stops_ancestor_rpath(tmp_path: Path) -> None:
    """glibc: an object with DT_RUNPATH does not search its loaders' DT_RPATH."""
    build = tmp_path / "build"
    build.mkdir()
    leaf = elf_env.gcc(
        build / "deep" / "libleaf.so", "int leaf(void){return 1;}", "-Wl,-soname,libleaf.so"
    )
    mid_src = "extern int leaf(void); int mid(void){return leaf();}"
    elf_env.gcc(build / "libmid_link.so", mid_src, f"-L{leaf.parent}", "-l:libleaf.so")
    site = elf_env.new_env(tmp_path / "env")
    lib_dir = site / "pkg" / "lib"
    lib_dir.mkdir(parents=True)
    mid = elf_env.gcc(
        lib_dir / "libmid.so",
        mid_src,
        "-Wl,-soname,libmid.so",
        f"-L{leaf.parent}",
        "-l:libleaf.so",
        "-Wl,--enable-new-dtags",
        "-Wl,-rpath,$ORIGIN/none",
    )
    (site / "pkg" / "deep").mkdir()
    shutil.copy2(leaf, site / "pkg" / "deep" / "libleaf.so")
    ext = elf_env.gcc(
        site / "pkg" / "_m.abi3.so",
        "extern int mid(void); int PyInit__m(void){return mid();}",
        f"-L{lib_dir}",
        "-l:libmid.so",
        "-Wl,--disable-new-dtags",
        "-Wl,-rpath,$ORIGIN/lib:$ORIGIN/deep",
    )
    elf_env.add_dist(site, "pkg", "1.0", [ext, mid, site / "pkg" / "deep" / "libleaf.so"])
    assert read_elf(mid).runpath == ("$ORIGIN/none",)
    env = load_environment(tmp_path / "env")
    findings = AbiChecker(env, system_dirs=()).check([ext])
    # libleaf.so sits in the extension's RPATH ($ORIGIN/deep), but libmid has RUNPATH
    assert [(m.requester.name, m.soname) for m in findings.missing_sonames] == [
        ("libmid.so", "libleaf.so")
    ]


def test_mangled_stem() -> None:
    assert (
        mangled_stem("_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib")
        == "_ZN3c104cuda29c10_cuda_check_implementationE"
    )
    assert mangled_stem("_ZN3c1013MessageLoggerC1EPKcii") == "_ZN3c1013MessageLoggerC1E"
    assert mangled_stem("_Z3fooi") == "_Z3foo"
    assert mangled_stem("cudaMalloc") is None


@pytest.mark.skipif(
    os.geteuid() == 0, reason="root reads mode-000 files; run as a user to check this"
)
def test_unreadable_shared_object_is_an_error(tmp_path: Path) -> None:
    site = elf_env.new_env(tmp_path / "env")
    _, ext = elf_env.versioned_pair(site, tmp_path / "build", old_provider=False)
    locked = site / "consumer" / "_locked.cpython-312-x86_64-linux-gnu.so"
    shutil.copy2(ext, locked)
    locked.chmod(0)
    try:
        results = _by_check(run_static(StaticInputs(env_path=tmp_path / "env", targets=())))
    finally:
        locked.chmod(0o644)
    assert results["static.abi.unreadable"].status == "ERROR"
    assert "_locked" in results["static.abi.unreadable"].reason


PY_EXT_C = """
extern void* PyLong_FromLong(long v);
void* PyInit__py(void) { return PyLong_FromLong(1); }
"""


def test_python_c_api_resolves_against_the_env_interpreter(tmp_path: Path) -> None:
    """Extensions take Py* from the interpreter (no DT_NEEDED libpython in manylinux wheels)."""
    site = elf_env.new_env(tmp_path / "env")
    ext = elf_env.gcc(site / "pyext" / "_py.cpython-312-x86_64-linux-gnu.so", PY_EXT_C)
    elf_env.add_dist(site, "pyext", "1.0", [ext])
    results = _by_check(run_static(StaticInputs(env_path=tmp_path / "env", targets=())))
    assert results["static.env"].status == "PASS"
    assert results["static.abi.pyext"].status == "PASS", results["static.abi.pyext"].reason
    # without an interpreter: an ERROR for the env, not a false "missing PyLong_FromLong"
    (tmp_path / "env" / "bin" / "python").unlink()
    results = _by_check(run_static(StaticInputs(env_path=tmp_path / "env", targets=())))
    assert results["static.env"].status == "ERROR"
    assert "no interpreter" in results["static.env"].reason
    assert results["static.abi.pyext"].status == "PASS"
    assert results["static.abi.summary"].evidence["python_api_unchecked"] == 1
