"""The NVML session of this process: initialised at most once, shut down at interpreter exit.

Every caller that talks to NVML (the GPU inventory, serve-bench's memory snapshots) goes
through `nvml()`. NVML counts nvmlInit/nvmlShutdown pairs, so one session per process is
both cheaper and safer than each probe opening and closing its own.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class NvmlSession:
    """The initialised pynvml module, or None and why NVML cannot be used here."""

    module: Any | None
    reason: str = ""


def _shutdown(module: Any) -> None:
    with contextlib.suppress(Exception):
        module.nvmlShutdown()


@functools.cache
def nvml() -> NvmlSession:
    try:
        import pynvml
    except ImportError as exc:
        return NvmlSession(None, f"nvidia-ml-py not importable: {exc}")
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound / DriverNotLoaded
        return NvmlSession(None, f"NVML unavailable: {exc} (no NVIDIA driver on this host)")
    atexit.register(_shutdown, pynvml)
    return NvmlSession(pynvml)


def text(value: Any) -> str:
    """NVML strings are bytes in older bindings, str in newer ones."""
    return value.decode() if isinstance(value, bytes) else str(value)
