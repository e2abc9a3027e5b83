"""The confirming loads' outcome, kept across runs while nothing they depend on changed.

A confirming run costs seconds to minutes, and its outcome is a function of the interpreter,
every installed distribution (its dist-info RECORD), every ELF file under site-packages, the
steps asked for, and the driver stand-in (the stub folder is named for its exports; a real
userland by its libcuda.so.1). The key is the identity (file_facts_cache.file_identity) of all
of those; a hit returns the recorded results, a miss runs the loads and records them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from validators.elf.file_facts_cache import FileFactsCache, file_identity
from validators.static.confirm import LoadRun, Step, StepResult
from validators.static.driver_userland import DriverUserland
from validators.static.environment import Environment

_OUTCOMES = ("ok", "error", "crash", "timeout", "stub-crash")


def loads_key(
    env: Environment,
    python: Path,
    steps: list[Step],
    stub_dir: Path | None,
    userland: DriverUserland | None,
) -> str | None:
    """None when some identity cannot be read (then nothing is cached)."""
    parts: list[str] = []
    for path in [
        python,
        *(d.dist_info / "RECORD" for d in env.distributions.values()),
        *env.shared_objects(),
        *([userland.folder / "libcuda.so.1"] if userland is not None else []),
    ]:
        ident = file_identity(path)
        if ident is None:
            return None
        parts.append(f"{path}={ident}")
    parts.sort()
    parts.append(json.dumps([s.__dict__ for s in steps]))
    parts.append(str(stub_dir))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def cached_loads(cache: FileFactsCache, key: str, steps: list[Step]) -> LoadRun | None:
    hit = cache.get("loads", key)
    if not isinstance(hit, dict):
        return None
    by_text = {json.dumps(s.__dict__): s for s in steps}
    try:
        results = []
        for row in hit["results"]:
            step = by_text[json.dumps(row["step"])]
            outcome = row["outcome"]
            if outcome not in _OUTCOMES:
                return None
            results.append(StepResult(step, outcome, str(row["error"])))
        return LoadRun(results, float(hit["seconds"]), int(hit["children"]))
    except (KeyError, TypeError, ValueError):
        return None


def store_loads(cache: FileFactsCache, key: str, run: LoadRun) -> None:
    value: dict[str, Any] = {
        "results": [
            {"step": r.step.__dict__, "outcome": r.outcome, "error": r.error} for r in run.results
        ],
        "seconds": run.seconds,
        "children": run.children,
    }
    cache.put("loads", key, value)
