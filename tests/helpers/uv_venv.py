"""Real venvs made and filled by real uv, with a uv cache the test owns (UV_CACHE_DIR): what
the builder's own install does, one command at a time, for tests of what ends up on disk."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from stackgate.uvbin import uv_bin
from tests.helpers.interpreter import PY_MINOR, base_python


def uv(args: list[str | Path], cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "UV_CACHE_DIR": str(cache), "UV_PYTHON_DOWNLOADS": "never"}
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run(
        [uv_bin(), *[str(a) for a in args]], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    return done


def venv(folder: Path, cache: Path) -> Path:
    """A fresh venv of the test's interpreter at folder/env."""
    env = folder / "env"
    uv(["venv", "--no-config", "--python", base_python(), env], cache)
    return env


def install(env: Path, cache: Path, *what: str | Path, index: str | None = None) -> None:
    """`uv pip install --no-deps --link-mode copy` (the builder's link mode) of wheel files, or
    of requirements from `index`."""
    args: list[str | Path] = ["pip", "install", "--no-config", "--no-deps", "--link-mode", "copy"]
    if index is not None:
        args += ["--index-url", index]
    uv([*args, "--python", env / "bin" / "python", *what], cache)


def site(env: Path) -> Path:
    return env / "lib" / f"python{PY_MINOR}" / "site-packages"
