"""The static checks of one installed env: distributions vs pins and lock, symbol-level ABI,
GPU-arch coverage. No GPU needed. Every check is a Result; an env that cannot be read is one
ERROR result. The group runner (group.py) and `validators static` call run_static.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stackgate.cli_hint import cli_command
from stackgate.errors import BadInput
from stackgate.lock.uvlock import read_uv_lock
from stackgate.manifest import Manifest
from stackgate.manifest.values import parse_arch
from validators.core.checks import StaticCheck
from validators.core.results import Result, make_result
from validators.elf.file_facts_cache import FileFactsCache
from validators.static.abi_results import (
    MAX_LISTED,
    AbiOptions,
    abi_results,
    prewarm_confirming,
    prewarms,
)
from validators.static.arch_check import scan
from validators.static.arch_results import arch_results
from validators.static.confirm import Prewarmed
from validators.static.dist_check import (
    DistFindings,
    check_lock,
    check_pins,
    check_requirements,
    lock_path,
    requirement_closure,
)
from validators.static.environment import Environment, NotAnEnvironment, load_environment
from validators.static.file_clashes import clash_result
from validators.static.prefetch import prefetch
from validators.static.resolution_cache import cached_scan
from validators.static.verdict import import_scan_inputs, scan_undeclared


@dataclass(frozen=True)
class StaticInputs:
    env_path: Path
    stack: str | None = None
    manifest: Manifest | None = None
    targets: tuple[str, ...] = ()
    lock: Path | None = None
    abi: AbiOptions = field(default_factory=AbiOptions)
    # facts kept across runs by file identity; None: read everything (tests, --lock)
    cache: FileFactsCache | None = None


_result = functools.partial(make_result, group="static")


def run_static(inputs: StaticInputs) -> list[Result]:
    started = time.perf_counter()
    try:
        env = load_environment(inputs.env_path)
    except NotAnEnvironment as exc:
        return [_result("static.env", "ERROR", str(exc))]
    except OSError as exc:
        return [_result("static.env", "ERROR", f"cannot read the environment: {exc}")]
    seconds = time.perf_counter() - started
    if env.interpreter is None:
        env_result = _result(
            "static.env",
            "ERROR",
            f"no interpreter at {inputs.env_path / 'bin' / 'python'}: the extensions' Python "
            f"C-API imports cannot be checked (the other checks ran on "
            f"{len(env.distributions)} distributions)",
            {},
            seconds,
        )
    else:
        env_result = _result(
            "static.env",
            "PASS",
            f"{len(env.distributions)} distributions in {env.site_packages}",
            {"interpreter": str(env.interpreter)},
            seconds,
        )
    results = [env_result, *_dist_results(env, inputs)]
    shared = env.shared_objects()
    # a first-time run: the facts of the uncached files in worker processes (prefetch.py)
    # (and the undeclared-import scan of each distribution with ELF files, verdict.classify)
    # a cold run with torch: its first confirming child imports torch while the env is read,
    # started once the workers have read every file's ELF facts (the driver names)
    early: list[Prewarmed] = []

    def start_child(names: frozenset[str]) -> None:
        if (child := prewarm_confirming(env, inputs.abi, names)) is not None:
            early.append(child)

    arch: list[Result] = []
    try:
        filled = prefetch(
            inputs.cache,
            shared,
            # with an early child, the GPU facts are read by the arch scan while the child
            # does the confirming loads (a core idle otherwise), not before the child starts
            gpu=bool(inputs.targets) and not prewarms(env, inputs.abi),
            jobs=lambda: _import_scans(env, shared),
            on_driver_names=start_child,
        )
        warm = early[0] if early else None
        if filled is not None:
            env_result.evidence.update(filled.evidence())
        relevant = None
        if inputs.manifest is not None:
            relevant = requirement_closure(
                env, {name: list(pin.extras) for name, pin in inputs.manifest.packages.items()}
            )
        results.extend(
            abi_results(
                env,
                shared,
                relevant,
                options=inputs.abi,
                cache=inputs.cache,
                prewarmed=warm,
                meanwhile=lambda: arch.extend(_arch_results(env, shared, inputs)),
            )
        )
        results.extend(arch)
    finally:
        for child in early:
            child.discard()
    return results


def _import_scans(env: Environment, shared: list[Path]) -> list[Callable[[FileFactsCache], object]]:
    installed, python = import_scan_inputs(env)
    owners = {d.key: d for p in shared if (d := env.owner(p)) is not None}
    return [
        functools.partial(scan_undeclared, env.site_packages, d, installed, python)
        for d in owners.values()
    ]


# --- distributions -----------------------------------------------------------------------


def _dist_results(env: Environment, inputs: StaticInputs) -> list[Result]:
    out: list[Result] = []
    t = time.perf_counter()
    findings = DistFindings()
    if inputs.manifest is None:
        out.append(_result("static.dists.pins", "SKIP", "no stack given: no pins to compare"))
    else:
        check_pins(inputs.manifest, env, findings)
        bad = findings.pin_mismatches + findings.pins_missing
        evidence = {"mismatches": findings.pin_mismatches, "missing": findings.pins_missing}
        ok = f"{findings.pins_checked} manifest pins match the installed versions"
        out.append(_listed("static.dists.pins", bad, ok, evidence, t))
    t = time.perf_counter()
    lock = inputs.lock or (lock_path(inputs.stack) if inputs.stack else None)
    if lock is None:
        out.append(_result("static.dists.lock", "SKIP", "no stack given: no lock to compare"))
    elif not lock.is_file():
        hint = f"no lock at {lock} (run `{cli_command('lock STACK')}`)"
        out.append(_result("static.dists.lock", "SKIP", hint))
    else:
        try:
            locked = read_uv_lock(lock)
        except BadInput as exc:
            out.append(_result("static.dists.lock", "ERROR", exc.message))
        else:
            check_lock(locked, env, findings)
            bad = findings.lock_mismatches + [f"{x}: not in the lock" for x in findings.not_in_lock]
            seen = {
                "lock": str(lock),
                "mismatches": findings.lock_mismatches,
                "not_in_lock": findings.not_in_lock,
            }
            ok = f"{len(env.distributions)} installed distributions match {lock.name}"
            out.append(_listed("static.dists.lock", bad, ok, seen, t))
    t = time.perf_counter()
    check_requirements(env, findings)
    unmet = findings.unmet_requirements
    ok = "every installed distribution's requirements are met"
    out.append(_listed("static.dists.requirements", unmet, ok, {"unmet": unmet}, t))
    out.append(clash_result(env.root))
    return out


def _listed(
    check: StaticCheck, bad: list[str], ok: str, evidence: dict[str, Any], t: float
) -> Result:
    """PASS saying `ok`, or FAIL naming the first of `bad`; timed from `t`."""
    reason = "; ".join(bad[:MAX_LISTED]) if bad else ok
    return _result(check, "FAIL" if bad else "PASS", reason, evidence, time.perf_counter() - t)


# --- GPU archs -----------------------------------------------------------------------------


def _arch_results(env: Environment, shared: list[Path], inputs: StaticInputs) -> list[Result]:
    t = time.perf_counter()
    scanned = functools.partial(scan, env, shared, inputs.cache)
    per_dist = cached_scan(env, shared, inputs.cache, scanned) if inputs.targets else {}
    return arch_results(env, per_dist, inputs.targets, inputs.manifest, time.perf_counter() - t)


def targets_from(values: Sequence[str] | None, manifest: Manifest | None) -> tuple[str, ...]:
    if values:
        return tuple(parse_arch(v) for item in values for v in item.split(",") if v)
    return tuple(manifest.host.target_archs) if manifest is not None else ()
