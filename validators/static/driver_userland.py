"""A real NVIDIA driver userland (Debian's `libcuda1`), to confirm a crash seen under the stub.

The stub of driver_stub.py exports the imported `cu*` names, each returning 100, and nothing
else. Some libraries (onnxruntime-gpu's CUDA provider) segfault at load with it but load with a
real userland, whose cuInit returns 100 (CUDA_ERROR_NO_DEVICE) without a GPU. So a crash under
the stub is run again with a real userland before it is a FAIL (abi_results._confirm).

Where one is found, first hit wins:
1. $STACKGATE_DRIVER_USERLAND: a folder holding libcuda.so.1;
2. ~/.cache/stackgate/driver-userland/usr/lib/x86_64-linux-gnu/nvidia/current, where
   `.ci/bootstrap` unpacks Debian bookworm's non-free `libcuda1`, `libnvidia-ptxjitcompiler1`
   and `libnvidia-ml1` (`apt-get download` + `dpkg -x`: nothing installed on the host or in an
   environment);
3. None: the caller says the crash could not be confirmed.
A host with a real driver needs none of this: its libcuda.so.1 is used, no stub is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stackgate.settings import value

ENV_VAR = "STACKGATE_DRIVER_USERLAND"
UNPACKED = Path("usr") / "lib" / "x86_64-linux-gnu" / "nvidia" / "current"


@dataclass(frozen=True)
class DriverUserland:
    folder: Path  # holds libcuda.so.1 (and libnvidia-ml.so.1 where unpacked)
    version: str  # libcuda.so.<version> beside it, or "unknown"

    def describe(self) -> str:
        return f"a real driver userland (libcuda.so.1 {self.version} from {self.folder})"


def default_folder() -> Path:
    return Path.home() / ".cache" / "stackgate" / "driver-userland" / UNPACKED


def find_userland() -> DriverUserland | None:
    folder = Path(value(ENV_VAR) or default_folder())
    if (folder / "libcuda.so.1").is_file():
        return DriverUserland(folder, _version(folder))
    return None


def _version(folder: Path) -> str:
    for path in sorted(folder.glob("libcuda.so.*")):
        tail = path.name.removeprefix("libcuda.so.")
        if tail.count(".") >= 1:
            return tail
    return "unknown"
