"""The resolution memo (issue 25 item 1): an unchanged env's ABI resolution and GPU-code scan
come from the memo with the same results as a fresh resolution; any change to what the
resolution read (an env file, a file outside the env, a folder listing, a symlink's target,
a distribution's RECORD ownership) makes it resolve again and see the change. Tiny real ELF
files built with gcc, the real resolver, a real cache folder; no confirming loads (they have
their own cache, tested in test_static_file_facts.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.validators import elf_env
from validators.core.results import Result
from validators.elf.file_facts_cache import FileFactsCache
from validators.static.abi_results import AbiOptions
from validators.static.resolution_cache import code_files
from validators.static.run import StaticInputs, run_static

pytestmark = pytest.mark.skipif(not elf_env.have_compilers(), reason="needs gcc and g++")

FIXTURES = Path(__file__).parent / "fixtures" / "fatbin"


def _run(env: Path, cache: FileFactsCache | None) -> dict[str, Result]:
    inputs = StaticInputs(
        env_path=env, targets=("9.0",), abi=AbiOptions(confirm=False), cache=cache
    )
    return {r.check: r for r in run_static(inputs)}


def _warm(env: Path, cache: FileFactsCache, check: str) -> str:
    """Run twice (the second from the memo); the first run's status of `check`."""
    status = _run(env, cache)[check].status
    assert _memo(_run(env, cache)) == "hit"
    return status


def _memo(results: dict[str, Result]) -> str:
    return str(results["static.abi.summary"].evidence["resolution_memo"])


def _comparable(results: dict[str, Result]) -> dict[str, tuple[str, str]]:
    out = {}
    for check, r in results.items():
        evidence = {k: v for k, v in r.evidence.items() if k not in ("resolution_memo", "seconds")}
        evidence.pop("scan_s", None)
        out[check] = (r.status, r.reason + repr(sorted(evidence.items(), key=str)))
    return out


def test_an_unchanged_env_comes_from_the_memo_with_the_same_results(tmp_path: Path) -> None:
    site = elf_env.new_env(tmp_path / "env")
    elf_env.versioned_pair(site, tmp_path / "build", old_provider=True)
    kernels = site / "kern" / "libdata.so"
    kernels.parent.mkdir(parents=True)
    shutil.copy2(FIXTURES / "libdata.so", kernels)
    elf_env.add_dist(site, "kern", "1.0", [kernels])
    cache = FileFactsCache(tmp_path / "cache")
    fresh = _run(tmp_path / "env", None)
    first = _run(tmp_path / "env", cache)
    second = _run(tmp_path / "env", cache)
    assert (_memo(fresh), _memo(first), _memo(second)) == ("off", "stored", "hit")
    assert _comparable(fresh) == _comparable(first) == _comparable(second)
    assert second["static.abi.consumer"].status == "FAIL"  # foo@VERS_2 missing, from the memo
    assert "static.arch.kern" in second


def test_a_replaced_library_in_the_env_is_resolved_again(tmp_path: Path) -> None:
    site = elf_env.new_env(tmp_path / "env")
    lib, _ext = elf_env.versioned_pair(site, tmp_path / "build", old_provider=True)
    cache = FileFactsCache(tmp_path / "cache")
    assert _warm(tmp_path / "env", cache, "static.abi.consumer") == "FAIL"
    lib.unlink()
    shutil.copy2(tmp_path / "build" / "libvers.so.1", lib)  # the VERS_2 build
    again = _run(tmp_path / "env", cache)
    assert _memo(again) == "stored"
    assert again["static.abi.consumer"].status == "PASS"


OUTSIDE_EXT_C = "extern int bar(void);\nint PyInit__ext(void) { return bar(); }\n"


def _ext_with_outside_rpath(tmp_path: Path, site: Path) -> Path:
    """An extension whose RPATH names a folder outside the env (tmp_path/outside)."""
    build = tmp_path / "build"
    build.mkdir(parents=True, exist_ok=True)
    elf_env.gcc(build / "libbar.so.1", "int bar(void){return 1;}\n", "-Wl,-soname,libbar.so.1")
    outside = tmp_path / "outside"
    outside.mkdir()
    ext = elf_env.gcc(
        site / "user" / "_ext.cpython-312-x86_64-linux-gnu.so",
        OUTSIDE_EXT_C,
        f"-L{build}",
        "-l:libbar.so.1",
        f"-Wl,-rpath,{outside}",
        "-Wl,--disable-new-dtags",
    )
    elf_env.add_dist(site, "user", "1.0", [ext])
    return outside


def test_a_library_appearing_outside_the_env_is_seen(tmp_path: Path) -> None:
    """Nothing in the env changed: only the listing of a folder the RPATH names."""
    site = elf_env.new_env(tmp_path / "env")
    outside = _ext_with_outside_rpath(tmp_path, site)
    cache = FileFactsCache(tmp_path / "cache")
    assert "libbar.so.1" in _run(tmp_path / "env", cache)["static.abi.user"].reason
    assert _memo(_run(tmp_path / "env", cache)) == "hit"
    shutil.copy2(tmp_path / "build" / "libbar.so.1", outside / "libbar.so.1")
    again = _run(tmp_path / "env", cache)
    assert _memo(again) == "stored"
    changed = again["static.abi.summary"].evidence["resolution_memo_changed"]
    assert changed == f"the listing of {outside} changed"
    assert again["static.abi.user"].status == "PASS"
    assert "libbar.so.1" not in again["static.abi.user"].reason


def test_a_symlink_outside_the_env_pointed_elsewhere_is_seen(tmp_path: Path) -> None:
    site = elf_env.new_env(tmp_path / "env")
    outside = _ext_with_outside_rpath(tmp_path, site)
    good = tmp_path / "build" / "libbar.so.1"
    empty = elf_env.gcc(tmp_path / "build" / "libempty.so", "int other(void){return 0;}\n")
    (outside / "libbar.so.1").symlink_to(good)
    cache = FileFactsCache(tmp_path / "cache")
    assert _warm(tmp_path / "env", cache, "static.abi.user") == "PASS"
    (outside / "libbar.so.1").unlink()
    (outside / "libbar.so.1").symlink_to(empty)  # same name, a library without bar()
    again = _run(tmp_path / "env", cache)
    assert _memo(again) == "stored"
    changed = again["static.abi.summary"].evidence["resolution_memo_changed"]
    assert changed == f"{outside / 'libbar.so.1'} no longer leads to {good}"
    assert again["static.abi.user"].status == "FAIL"
    assert "bar" in again["static.abi.user"].reason


def test_a_distribution_removed_from_the_env_is_seen(tmp_path: Path) -> None:
    """pip uninstall of the provider: its files and dist-info go; the consumer's verdict now
    names the missing library."""
    site = elf_env.new_env(tmp_path / "env")
    lib, _ext = elf_env.versioned_pair(site, tmp_path / "build", old_provider=False)
    cache = FileFactsCache(tmp_path / "cache")
    assert _warm(tmp_path / "env", cache, "static.abi.consumer") == "PASS"
    lib.unlink()
    shutil.rmtree(site / "provider-0.9.dist-info", ignore_errors=True)
    shutil.rmtree(site / "provider-1.0.dist-info")
    again = _run(tmp_path / "env", cache)
    assert _memo(again) == "stored"
    assert "libvers.so.1" in again["static.abi.consumer"].reason


def test_python_writing_its_bytecode_beside_the_modules_is_no_change(tmp_path: Path) -> None:
    """The first import after a run writes __pycache__/ into every package folder the
    resolver listed: nothing a loader is asked for."""
    site = elf_env.new_env(tmp_path / "env")
    elf_env.versioned_pair(site, tmp_path / "build", old_provider=True)
    cache = FileFactsCache(tmp_path / "cache")
    assert _warm(tmp_path / "env", cache, "static.abi.consumer") == "FAIL"
    for folder in (site / "consumer", site / "provider" / "lib"):
        (folder / "__pycache__").mkdir()
        (folder / "helpers.py").write_text("", encoding="utf-8")
    assert _memo(_run(tmp_path / "env", cache)) == "hit"
    (site / "provider" / "lib" / "libextra.so.1").write_bytes(b"not even ELF")
    assert _memo(_run(tmp_path / "env", cache)) == "stored"  # a name a loader may ask for


def test_a_damaged_memo_entry_is_a_miss(tmp_path: Path) -> None:
    site = elf_env.new_env(tmp_path / "env")
    elf_env.versioned_pair(site, tmp_path / "build", old_provider=True)
    cache = FileFactsCache(tmp_path / "cache")
    first = _run(tmp_path / "env", cache)
    for entry in (tmp_path / "cache").rglob("*.json"):
        if "memo-" in str(entry):
            entry.write_text('{"answers": {"files": 3}}', encoding="utf-8")
    again = _run(tmp_path / "env", cache)
    assert _memo(again) == "stored"
    assert _comparable(again) == _comparable(first)


@pytest.mark.parametrize(
    ("entry", "readers"),
    [
        ("validators.static.group", ()),  # the env memo: code_digest()
        ("validators.lockcheck.check", ("validators.lockcheck",)),  # lock_memo: over lockcheck/
    ],
)
def test_every_module_the_memoised_code_loads_is_in_the_code_digest(
    entry: str, readers: tuple[str, ...]
) -> None:
    """An edit of any module the static group or the lock check runs on (stackgate's manifest,
    lock and installed-distribution readers too) makes its memo a miss: each module a fresh
    interpreter loads for it is one of the code_files() its memo digests.
    validators/__init__.py is a docstring."""
    loaded = subprocess.run(
        [sys.executable, "-c", LOADED.format(entry=entry)],
        cwd=Path(__file__).resolve().parents[2],  # the checkout the test process imports
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    root = Path(__file__).resolve().parents[2]
    folders = [root.joinpath(*r.split(".")) for r in readers]
    digested = {path.resolve() for _, path in code_files(*folders)}
    ours = [Path(f) for f in loaded if f and Path(f).parent.name != "validators"]
    assert len(ours) > 40, ours
    missing = sorted(str(f) for f in ours if f not in digested)
    assert not missing, missing


def test_the_static_memo_does_not_digest_the_lock_reader() -> None:
    """The installed-env check runs none of lockcheck/: an edit there leaves its memo valid,
    while the lock memo's digest covers it."""
    lockcheck = Path(__file__).resolve().parents[2] / "validators" / "lockcheck"
    assert not any(p.parent == lockcheck for _, p in code_files())
    assert any(p.parent == lockcheck for _, p in code_files(lockcheck))


LOADED = """
import sys
from pathlib import Path
import {entry}  # the memoised run
roots = {{Path(m.__file__).resolve().parent for m in (sys.modules["stackgate"],
         sys.modules["validators"])}}
for module in list(sys.modules.values()):
    path = Path(getattr(module, "__file__", None) or "/").resolve()
    if any(path.is_relative_to(r) for r in roots):
        print(path)
"""
