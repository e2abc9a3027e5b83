"""Stub NVIDIA driver libraries, so a CPU host can load an env's modules for real.

libcuda.so.1 and libnvidia-ml.so.1 come with the driver, never with a Python env, so without one
every module linking them fails to load before its own symbols are looked at. The confirming load
(confirm.py) puts generated stand-ins first on the child's LD_LIBRARY_PATH only:
- libcuda.so.1 exports every `cu*` name the env imports, each returning 100
  (CUDA_ERROR_NO_DEVICE): code calling the driver sees "no GPU";
- libnvidia-ml.so.1 exports every `nvml*` name imported, each returning 9
  (NVML_ERROR_DRIVER_NOT_LOADED).

They are compiled with the system C compiler (stackgate/compiler.py: fixed path, clean
environment) into a cache folder keyed by the names (~/.cache/stackgate/driver-stubs/<sha>/),
never into the environment, and used only when no real libcuda.so.1 is on the library path.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from stackgate.compiler import CompilerUnavailable, compiler_env, find_compiler
from stackgate.settings import cache_root, folder

DRIVER_LIBS = {"libcuda.so.1": ("cu", 100), "libnvidia-ml.so.1": ("nvml", 9)}
DRIVER_NAME = _NAME = re.compile(r"^(cu[A-Z]\w*|nvml\w+)$")
CACHE_ENV = "STACKGATE_DRIVER_STUB_CACHE"


class StubBuildError(Exception):
    """No C compiler, or it failed: the stub cannot be built (an environment problem)."""


@dataclass(frozen=True)
class DriverStubs:
    folder: Path  # holds libcuda.so.1 and libnvidia-ml.so.1
    names: int


def driver_names(imports: Iterable[str]) -> dict[str, list[str]]:
    """Split imported names into the two driver libraries' export lists."""
    out: dict[str, list[str]] = {lib: [] for lib in DRIVER_LIBS}
    for name in sorted(set(imports)):
        if not _NAME.match(name):
            continue
        out["libnvidia-ml.so.1" if name.startswith("nvml") else "libcuda.so.1"].append(name)
    return out


def _cache_root() -> Path:
    return folder(CACHE_ENV, "the driver stub cache") or cache_root() / "driver-stubs"


def build_stubs(imports: Iterable[str], cache: Path | None = None) -> DriverStubs:
    """Compile (once per set of names) the two stub libraries; StubBuildError on failure."""
    names = driver_names(imports)
    digest = hashlib.sha256(repr(sorted(names.items())).encode()).hexdigest()[:16]
    folder = (cache or _cache_root()) / digest
    total = sum(len(v) for v in names.values())
    if all((folder / lib).is_file() for lib in DRIVER_LIBS):
        return DriverStubs(folder, total)
    try:
        compiler = find_compiler()
    except CompilerUnavailable as exc:
        raise StubBuildError(f"cannot build the driver stubs: {exc}") from None
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{digest}-", dir=folder.parent))
    try:
        for lib, (_prefix, code) in DRIVER_LIBS.items():
            source = work / f"{lib}.c"
            body = "".join(f"int {n}(void) {{ return {code}; }}\n" for n in names[lib])
            source.write_text(
                f"/* stackgate driver stub for {lib}: no GPU here */\n{body or 'int _stub;'}\n",
                encoding="utf-8",
            )
            argv = [str(compiler), "-shared", "-fPIC", "-O0", f"-Wl,-soname,{lib}"]
            done = subprocess.run(
                [*argv, "-o", str(work / lib), str(source)],
                capture_output=True,
                text=True,
                check=False,
                env=compiler_env(work),
                cwd=work,
            )
            if done.returncode != 0:
                raise StubBuildError(f"{compiler} failed building {lib}: {done.stderr[-400:]}")
        try:
            work.rename(folder)
        except OSError:  # another process built the same stubs first
            if not all((folder / lib).is_file() for lib in DRIVER_LIBS):
                raise
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return DriverStubs(folder, total)
