"""The one way stackgate finds and runs a C compiler (the fleet's pin helper, the driver stubs).

A compiler and the headers it reads are code that runs, often as root. Neither is taken from
the caller's environment: the compiler is the first of SYSTEM_COMPILERS that exists (absolute
paths, never a PATH lookup, so neither an empty PATH entry, meaning the working folder, nor a
folder put first on PATH can choose it) unless a flag names one explicitly, and the compiler
runs with COMPILER_ENV only (no CPATH / C_INCLUDE_PATH / LIBRARY_PATH / GCC_EXEC_PREFIX /
COMPILER_PATH / LD_PRELOAD ...), so headers come from the system include folders only.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

SYSTEM_COMPILERS = ("/usr/bin/cc", "/usr/bin/gcc", "/usr/bin/clang")
# The system include folders a header is looked for in before compiling (`can_include`).
SYSTEM_INCLUDE_DIRS = ("/usr/include", "/usr/local/include")
COMPILER_PATH = "/usr/bin:/bin"


class CompilerUnavailable(Exception):
    """No compiler this module may use: none of the fixed list, or the named one is unfit."""


def _fit(path: Path) -> str | None:
    """Why `path` may not be run as a compiler (None: it may)."""
    if not path.is_absolute():
        return "not an absolute path"
    try:
        info = path.stat()
    except OSError as exc:
        return exc.strerror or "cannot be read"
    if not stat.S_ISREG(info.st_mode) or not os.access(path, os.X_OK):
        return "not an executable file"
    if info.st_mode & stat.S_IWOTH:
        return "writable by every user"
    return None


def find_compiler(explicit: str | None = None) -> Path:
    """The compiler to run: `explicit` (a flag's absolute path) or the first of
    SYSTEM_COMPILERS present; CompilerUnavailable says why none."""
    if explicit is not None:
        named = Path(explicit)
        why = _fit(named)
        if why is not None:
            raise CompilerUnavailable(f"--cc {explicit}: {why}")
        return named
    for candidate in SYSTEM_COMPILERS:
        if _fit(Path(candidate)) is None:
            return Path(candidate)
    raise CompilerUnavailable(
        f"no C compiler at {', '.join(SYSTEM_COMPILERS)} (PATH is not searched; --cc names one)"
    )


def compiler_env(tmp: Path) -> dict[str, str]:
    """The whole environment of a compiler run: fixed PATH for its own parts (as, ld), the C
    locale, a private TMPDIR. Nothing of the caller's environment."""
    return {"PATH": COMPILER_PATH, "LC_ALL": "C", "TMPDIR": str(tmp)}


def can_include(header: str) -> bool:
    """Whether `header` (e.g. "slurm/slurm.h") is in a system include folder (no compiling)."""
    return any((Path(d) / header).is_file() for d in SYSTEM_INCLUDE_DIRS)
