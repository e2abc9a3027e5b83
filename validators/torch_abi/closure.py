"""What torch X.Y.Z brings with it: the wheels `uv lock` resolves for `torch==X.Y.Z` alone
(its nvidia-* CUDA libraries, triton, ...), kept as a uv.lock in the cache so each torch
version is resolved once. A kernel package is judged beside this closure: its DT_NEEDED
libraries and symbols must come from torch or the libraries torch's own pins install."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from stackgate import proc
from stackgate.errors import CommandFailed
from stackgate.lock.torch_abi import PYPI
from stackgate.lock.wheels import LockError, LockWheels, read_lock
from stackgate.uvbin import uv_bin
from validators.elf.facts_cache import FactsCache


class ClosureError(Exception):
    """uv could not resolve torch==X here (no such version, index down): said with uv's words."""


def _project(torch: str, python: tuple[int, int], torch_index: str, index: str) -> str:
    # The target Python is pinned by the environment marker, not by requires-python, so that
    # uv can run the resolution with whatever interpreter the host has (it needs one that
    # satisfies requires-python, and the host need not have the target's X.Y).
    py = f"{python[0]}.{python[1]}"
    marker = (
        "sys_platform == 'linux' and platform_machine == 'x86_64' and "
        f"python_full_version >= '{py}' and python_full_version < '{python[0]}.{python[1] + 1}'"
    )
    lines = [
        "[project]",
        'name = "stackgate-compat-closure"',
        'version = "0"',
        'requires-python = ">=3.8"',
        f'dependencies = ["torch=={torch}"]',
        "",
        "[tool.uv]",
        f'environments = ["{marker}"]',
        "",
        "[[tool.uv.index]]",
        'name = "compat-default"',
        f'url = "{index}"',
        "default = true",
    ]
    if torch_index != index:
        lines += [
            "",
            "[[tool.uv.index]]",
            'name = "compat-torch"',
            f'url = "{torch_index}"',
            "explicit = true",
            "",
            "[tool.uv.sources]",
            'torch = { index = "compat-torch" }',
        ]
    return "\n".join(lines) + "\n"


def closure_path(
    cache: FactsCache, torch: str, python: tuple[int, int], torch_index: str, index: str
) -> Path:
    key = hashlib.sha256(_project(torch, python, torch_index, index).encode()).hexdigest()[:24]
    return cache.root / "compat" / "closures" / f"torch-{torch}-{key}.uv.lock"


def torch_closure(
    cache: FactsCache,
    torch: str,
    python: tuple[int, int],
    *,
    torch_index: str = PYPI,
    index: str = PYPI,
    offline: bool = False,
) -> LockWheels:
    """The closure's wheels for the target; resolved with uv on a cache miss."""
    path = closure_path(cache, torch, python, torch_index, index)
    if not path.is_file():
        if offline:
            raise ClosureError(f"torch {torch}: offline and no cached closure ({path.name})")
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="stackgate-compat-") as tmp:
            project = Path(tmp)
            (project / "pyproject.toml").write_text(
                _project(torch, python, torch_index, index), encoding="utf-8"
            )
            env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV",)}
            env["UV_PYTHON_DOWNLOADS"] = "never"
            try:
                proc.run(
                    [uv_bin(), "lock", "--no-python-downloads"],
                    env=env,
                    cwd=project,
                    timeout=600,
                )
            except CommandFailed as exc:
                tail = (exc.stderr or "").strip().splitlines()[-3:]
                raise ClosureError(f"torch {torch}: uv lock failed: {' '.join(tail)}") from None
            tmp_lock = path.with_suffix(f".tmp{os.getpid()}")
            tmp_lock.write_bytes((project / "uv.lock").read_bytes())
            tmp_lock.replace(path)
    try:
        wheels = read_lock(path, python)
    except LockError as exc:
        raise ClosureError(str(exc)) from None
    wheels.wheels = [w for w in wheels.wheels if w.name != "stackgate-compat-closure"]
    return wheels
