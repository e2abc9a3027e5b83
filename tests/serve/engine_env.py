"""The CPU inference engine for real serve-bench tests: `transformers serve` in its own venv.

Built once and cached under ~/.cache/stackgate/engines/transformers-serve (about 1.2 GB, ~100 s
on 2 cores: torch 2.13.0 comes from the machine's wheel folder where pip has one, the rest from
PyPI). A marker file says the build finished; a half-built venv is rebuilt.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ENGINE_REQUIREMENTS = ["torch==2.13.0", "transformers[serving]"]


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "stackgate" / "engines"


def transformers_serve_env() -> Path:
    """The engine venv, built if missing. Needs PyPI (tests using it are marked network)."""
    venv = cache_root() / "transformers-serve"
    marker = venv / ".stackgate-complete"
    if marker.is_file():
        return venv
    if venv.exists():
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--no-cache-dir", *ENGINE_REQUIREMENTS],
        check=True,
    )
    marker.write_text(" ".join(ENGINE_REQUIREMENTS) + "\n")
    return venv
