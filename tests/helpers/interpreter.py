"""The interpreter the tests' stacks ask for: the one running the tests, so no other Python is
needed (uv builds envs from the base interpreter under the test venv)."""

from __future__ import annotations

import sys
from pathlib import Path

PY_MINOR = f"{sys.version_info.major}.{sys.version_info.minor}"


def base_python() -> str:
    """The real interpreter under the test venv (uv builds envs from it)."""
    for name in (f"python{PY_MINOR}", "python3", "python"):
        candidate = Path(sys.base_prefix) / "bin" / name
        if candidate.is_file():
            return str(candidate)
    raise RuntimeError("no base interpreter found")
