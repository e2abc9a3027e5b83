"""Facts kept across static runs by file identity (issue 25 item 1): the same answers as a
fresh read, from the cache while a file is unchanged, read again once it changes; confirming
loads taken from an earlier run only while nothing they depend on changed. Tiny real ELF
files (gcc, nvcc fixtures) and real confirming loads."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.validators import elf_env
from validators.elf.elf_symbols import read_elf
from validators.elf.fatbin import gpu_code
from validators.elf.file_facts_cache import FileFactsCache
from validators.static.abi_results import AbiOptions
from validators.static.run import StaticInputs, run_static

pytestmark = pytest.mark.skipif(not elf_env.have_compilers(), reason="needs gcc and g++")

FIXTURES = Path(__file__).parent / "fixtures" / "fatbin"


def test_elf_and_gpu_facts_come_back_equal_and_change_with_the_file(tmp_path: Path) -> None:
    cache = FileFactsCache(tmp_path / "cache", min_size=0)
    lib = elf_env.gcc(tmp_path / "libx.so", "int a(void){return 1;}\n", "-Wl,-soname,libx.so")
    first = cache.elf(lib)
    assert (cache.hits, cache.misses) == (0, 1)
    again = cache.elf(lib)
    assert (cache.hits, cache.misses) == (1, 1)
    assert again == first == read_elf(lib)
    # a rebuilt file (new content, new identity) is read again
    lib.unlink()
    elf_env.gcc(lib, "int a(void){return 1;}\nint b(void){return 2;}\n", "-Wl,-soname,libx.so")
    changed = cache.elf(lib)
    assert cache.misses == 2
    assert "b" in changed.exports and "b" not in first.exports
    kernels = tmp_path / "libdata.so"
    shutil.copy2(FIXTURES / "libdata.so", kernels)
    assert cache.gpu(kernels) == gpu_code(kernels)
    assert cache.gpu(kernels) == gpu_code(kernels)  # the second from the cache
    assert cache.hits == 2


CRASH_C = (
    "#include <signal.h>\n__attribute__((constructor)) static void f(void){ raise(SIGSEGV); }\n"
)


def test_confirming_loads_are_reused_until_the_env_changes(tmp_path: Path) -> None:
    site = elf_env.new_env(tmp_path / "env")
    plugin = elf_env.gcc(site / "crashy" / "libplug.so", CRASH_C)
    elf_env.add_package(site, "crashy", [plugin])
    cache = FileFactsCache(tmp_path / "cache", min_size=0)

    def summary_and_verdict() -> tuple[str, str]:
        inputs = StaticInputs(env_path=tmp_path / "env", abi=AbiOptions(deep=True), cache=cache)
        results = {r.check: r for r in run_static(inputs)}
        return results["static.abi.summary"].reason, results["static.abi.crashy"].reason

    note, verdict = summary_and_verdict()
    assert "(cached" not in note
    assert verdict.startswith("crashes at load (SIGSEGV)")
    note2, verdict2 = summary_and_verdict()
    assert "(cached: the env's files and the steps are those of an earlier run)" in note2
    assert verdict2 == verdict
    # the plugin rebuilt (now it loads): the loads run again and see it
    plugin.unlink()
    elf_env.gcc(plugin, "int fine(void){return 0;}\n")
    note3, verdict3 = summary_and_verdict()
    assert "(cached" not in note3
    assert "crashes" not in verdict3
