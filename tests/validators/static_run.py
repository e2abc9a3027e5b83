"""The static group run in-process on a folder, its results by check name (for tests that
judge one env several ways)."""

from __future__ import annotations

from pathlib import Path

from validators.core.results import Result
from validators.static.abi_results import AbiOptions
from validators.static.run import StaticInputs, run_static


def static_results(env: Path, **abi: bool) -> dict[str, Result]:
    """run_static on `env` with no GPU targets; `abi` sets AbiOptions (confirm, deep, ...)."""
    results = run_static(StaticInputs(env_path=env, targets=(), abi=AbiOptions(**abi)))
    return {r.check: r for r in results}
