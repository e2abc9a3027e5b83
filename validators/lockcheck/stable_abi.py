"""Which extensions survive a torch upgrade by design: those whose torch-side imports are only
the LibTorch stable C shim (`aoti_torch_*`, `torch_*` C symbols, as STABLE_TORCH_LIBRARY
extensions use), and abi3 Python extensions (the limited C API).

The minimum torch version of a shim user is found from the torch builds whose exports this
cache has seen (each torch's libtorch_cpu shim exports are indexed by version), so the answer
says which versions it was checked against.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

from packaging.version import InvalidVersion, Version

from validators.core.checks import STATIC_ABI, family_id
from validators.core.results import Result, make_result
from validators.elf.facts_cache import FactsCache
from validators.elf.object_facts import ObjectFacts
from validators.static.abi_results import check_key
from validators.static.environment import Environment

_result = functools.partial(make_result, group="static")
SHIM = re.compile(r"^(aoti_torch_\w+|torch_\w+)$")
# C++ names of torch's unstable API: c10::, at::, torch::, caffe2::
UNSTABLE = re.compile(r"^_Z\w*?N?(3c10|2at|5torch|6caffe2)")


def _torch_version(env: Environment) -> str | None:
    dist = env.distributions.get("torch")
    return dist.version if dist else None


def index_path(cache: FactsCache) -> Path:
    return cache.root / "torch-shim-exports.json"


def _update_index(
    cache: FactsCache, env: Environment, facts: list[ObjectFacts]
) -> dict[str, list[str]]:
    path = index_path(cache)
    try:
        index: dict[str, list[str]] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        index = {}
    version = _torch_version(env)
    if version is not None:
        exported = sorted(
            {
                n
                for f in facts
                if f.path.name == "libtorch_cpu.so"
                for n in f.elf.exports
                if SHIM.match(n)
            }
        )
        if exported and index.get(version) != exported:
            index[version] = exported
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{id(index)}")
            tmp.write_text(json.dumps(index), encoding="utf-8")
            tmp.replace(path)
    return index


def _sort_key(v: str) -> Version:
    try:
        return Version(v)
    except InvalidVersion:
        return Version("0")


def stable_abi_results(
    env: Environment, facts: list[ObjectFacts], cache: FactsCache
) -> list[Result]:
    index = _update_index(cache, env, facts)
    by_dist: dict[str, list[str]] = {}
    shim_users: dict[str, set[str]] = {}
    for f in facts:
        if not f.python_extension:
            continue
        label = env.owner_label(f.path)
        if label.startswith("torch "):
            continue
        torch_needed = any(n.startswith(("libtorch", "libc10")) for n in f.needed)
        unstable = [i.name for i in f.imports if UNSTABLE.match(i.name)]
        shim = sorted(i.name for i in f.imports if SHIM.match(i.name))
        rel = (
            str(f.path.relative_to(env.site_packages))
            if f.path.is_relative_to(env.site_packages)
            else str(f.path)
        )
        if torch_needed and shim and not unstable:
            by_dist.setdefault(label, []).append(rel)
            shim_users.setdefault(label, set()).update(shim)
    out: list[Result] = []
    for label, modules in sorted(by_dist.items()):
        needed = shim_users[label]
        seen = sorted(index, key=_sort_key)
        enough = [v for v in seen if needed <= set(index[v])]
        minimum = enough[0] if enough else None
        reason = (
            f"{label}: {len(modules)} extension modules use only the LibTorch stable C shim "
            f"({len(needed)} shim symbols), so they survive torch upgrades by design"
        )
        if minimum:
            reason += f"; needs torch >= {minimum} (of torch {', '.join(seen)} seen by this cache)"
        elif seen:
            reason += f"; no torch seen by this cache ({', '.join(seen)}) exports all of them"
        out.append(
            _result(
                family_id(STATIC_ABI, f"stable.{check_key(label)}"),
                "PASS",
                reason,
                {
                    "modules": modules,
                    "shim_symbols": sorted(needed),
                    "min_torch": minimum,
                    "torch_seen": seen,
                },
            )
        )
    abi3 = sorted(
        {env.owner_label(f.path) for f in facts if f.python_extension and ".abi3." in f.path.name}
    )
    if abi3:
        out.append(
            _result(
                family_id(STATIC_ABI, "stable.abi3"),
                "PASS",
                f"{len(abi3)} distributions ship abi3 (limited C API) extensions: any CPython >= "
                "their minimum loads them",
                {"distributions": abi3},
            )
        )
    return out
