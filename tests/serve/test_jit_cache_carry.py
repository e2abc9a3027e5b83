"""benchmarks/h200_sglang/h200_sglang_jit_cache.sh: a JIT cache carried to a fresh machine is reused.

FlashInfer builds each JIT module with ninja in its own folder (build.ninja, .ninja_log,
.ninja_deps, .o, .so); ninja rebuilds when any input, headers from the deps log included, is
newer than the output's log entry, and a freshly installed env's headers are new. Here a real
ninja and a real C compiler build a module laid out the way FlashInfer 0.6.15 lays its cache
out (a header under an env's site-packages, a generated source, a depfile), the cache is saved,
the env is "installed again" (same bytes, new mtimes), the cache restored, and ninja itself
is asked whether it would compile: the restore must leave "no work to do", and ninja must not
rebuild. No GPU: the ninja rules are what is under test, not nvcc.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "h200_sglang" / "h200_sglang_jit_cache.sh"
CC = shutil.which("cc") or shutil.which("gcc")

pytestmark = pytest.mark.skipif(
    shutil.which("ninja") is None or CC is None, reason="needs ninja and a C compiler"
)


def run(*args: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *map(str, args)], env=env, capture_output=True, text=True,
        check=False,
    )  # fmt: skip


def install_env(site: Path) -> Path:
    """The env's headers, written now (as uv writes them at install time)."""
    header = site / "flashinfer" / "data" / "include" / "norm.h"
    header.parent.mkdir(parents=True, exist_ok=True)
    header.write_text("#define SCALE 3\n")
    return header


def build_module(base: Path, site: Path) -> Path:
    """One module as FlashInfer's JitSpec.build leaves it: cached_ops/<name>/ after ninja."""
    name = "norm"
    gen = base / ".cache" / "flashinfer" / "0.6.15.post1" / "90a" / "generated" / name
    mod = base / ".cache" / "flashinfer" / "0.6.15.post1" / "90a" / "cached_ops" / name
    gen.mkdir(parents=True)
    mod.mkdir(parents=True)
    (gen / "norm.c").write_text('#include "norm.h"\nint norm(int x) { return SCALE * x; }\n')
    inc = (site / "flashinfer" / "data" / "include").resolve()
    (mod / "build.ninja").write_text(
        "ninja_required_version = 1.3\n"
        f"cflags = -fPIC -I{inc}\n"
        "rule compile\n  command = cc -MMD -MF $out.d $cflags -c $in -o $out\n"
        "  depfile = $out.d\n  deps = gcc\n"
        "rule link\n  command = cc -shared $in -o $out\n"
        f"build {mod.resolve()}/norm.o: compile {(gen / 'norm.c').resolve()}\n"
        f"build {mod.resolve()}/norm.so: link {mod.resolve()}/norm.o\n"
        f"default {mod.resolve()}/norm.so\n"
    )
    subprocess.run(["ninja", "-C", str(mod), "-f", str(mod / "build.ninja")], check=True,
                   capture_output=True)  # fmt: skip
    return mod


def dry_run(mod: Path) -> str:
    out = subprocess.run(
        ["ninja", "-C", str(mod), "-f", str(mod / "build.ninja"), "-n"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return out.stdout


@pytest.fixture
def machine(tmp_path: Path) -> dict[str, Path]:
    home, site = tmp_path / "home", tmp_path / "envs" / "h200-sglang-1360" / "site-packages"
    install_env(site)
    mod = build_module(home, site)
    tvm = home / ".cache" / "tvm-ffi" / "sgl_kernel_jit_moe_wna16_marlin__arch_sm90__tvmffi_0.1.15"
    tvm.mkdir(parents=True)
    (tvm / "sgl_kernel_jit_moe_wna16_marlin.so").write_bytes(b"\x7fELF marlin")
    tri = home / ".triton" / "cache" / "ABC"
    tri.mkdir(parents=True)
    (tri / "fused_moe.json").write_text("{}")
    return {"home": home, "site": site, "mod": mod, "tmp": tmp_path}


def env_for(home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FLASHINFER_", "TVM_FFI_", "TRITON_"))
    }
    env["HOME"] = str(home)
    return env


def test_restored_cache_is_not_rebuilt_on_a_fresh_install(machine: dict[str, Path]) -> None:
    home, site, mod, tmp = machine["home"], machine["site"], machine["mod"], machine["tmp"]
    carry = tmp / "carry"
    saved = run("save", carry, "200", env=env_for(home))
    assert saved.returncode == 0, saved.stderr
    parts = sorted(carry.glob("jit.tar.part-*"))
    assert len(parts) > 1 and all(p.stat().st_size <= 200 for p in parts)
    assert "sgl_kernel_jit_moe_wna16_marlin.so" in (carry / "MANIFEST.txt").read_text()

    # the next machine: no caches, the env installed again (same bytes, written later)
    shutil.rmtree(home)
    time.sleep(1.1)  # mtimes have 1 s resolution in the restore; the install must be later
    header = install_env(site)
    report = tmp / "restore.txt"
    done = run("restore", carry, site.parent, report, env=env_for(home))
    assert done.returncode == 0, done.stderr
    text = report.read_text()
    assert "flashinfer norm: built (no work to do)" in text, text
    assert "flashinfer modules: 1 carried, 0 would compile again" in text
    assert "tvm-ffi modules: 1 carried; triton kernels: 1 carried" in text
    assert (home / ".cache" / "tvm-ffi").is_dir() and (home / ".triton" / "cache" / "ABC").is_dir()
    so_before = (mod / "norm.so").stat().st_mtime_ns
    real = subprocess.run(["ninja", "-C", str(mod), "-f", str(mod / "build.ninja")],
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert "no work to do" in real.stdout
    assert (mod / "norm.so").stat().st_mtime_ns == so_before
    assert header.read_text() == "#define SCALE 3\n"  # content untouched

    # not vacuous: the same header edited after the restore is a rebuild, and ninja says so
    header.write_text("#define SCALE 4\n")
    assert "norm.o" in dry_run(mod)


def test_without_the_restore_step_ninja_would_rebuild(machine: dict[str, Path]) -> None:
    """The cause the restore fixes: carried outputs, a newer install -> ninja compiles."""
    home, site, mod = machine["home"], machine["site"], machine["mod"]
    assert "no work to do" in subprocess.run(
        ["ninja", "-C", str(mod), "-f", str(mod / "build.ninja"), "-n"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    time.sleep(1.1)
    install_env(site)
    assert "norm.o" in dry_run(mod)
    assert home.is_dir()


def test_restore_refuses_a_corrupt_part_and_unpacks_nothing(machine: dict[str, Path]) -> None:
    home, site, tmp = machine["home"], machine["site"], machine["tmp"]
    carry = tmp / "carry"
    assert run("save", carry, env=env_for(home)).returncode == 0
    part = sorted(carry.glob("jit.tar.part-*"))[0]
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte (a tar's tail is zeros: flip the middle)
    part.write_bytes(bytes(data))
    shutil.rmtree(home)
    report = tmp / "restore.txt"
    done = run("restore", carry, site.parent, report, env=env_for(home))
    assert done.returncode == 3
    assert "FAILED" in report.read_text() and "sha256 mismatch" in report.read_text()
    assert not home.exists()


def test_nothing_carried_and_bad_use(machine: dict[str, Path]) -> None:
    home, site, tmp = machine["home"], machine["site"], machine["tmp"]
    report = tmp / "r.txt"
    empty = tmp / "empty"
    empty.mkdir()
    assert run("restore", empty, site.parent, report, env=env_for(home)).returncode == 0
    assert report.read_text().startswith("no JIT cache carried")
    missing = run("restore", empty, tmp / "nope", report, env=env_for(home))
    assert missing.returncode == 2 and "ENV_ROOT: no such folder" in missing.stderr
    assert run("frobnicate", env=env_for(home)).returncode == 2
    assert run("save", env=env_for(home)).returncode == 2
