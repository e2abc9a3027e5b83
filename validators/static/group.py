"""The static group: distributions vs pins and lock, symbol-level ABI, GPU-arch coverage.

No GPU needed. Every check is a Result; an env that cannot be read is one ERROR result.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name

from stackgate.cli_hint import cli_command
from stackgate.errors import BadInput
from stackgate.layout import lock_files_of
from stackgate.manifest import Manifest
from stackgate.manifest_values import parse_arch
from stackgate.uvlock import read_uv_lock
from validators.core.checks import STATIC_ARCH, family_id
from validators.core.context import RunContext
from validators.core.results import Result, make_result
from validators.static.abi_results import (
    AbiOptions,
    abi_results,
    check_key,
    prewarm_confirming,
    prewarms,
    short,
)
from validators.static.arch_check import DistCode, coverage, scan
from validators.static.confirm import Prewarmed
from validators.static.dist_check import (
    DistFindings,
    check_lock,
    check_pins,
    check_requirements,
    lock_path,
    requirement_closure,
)
from validators.static.env_memo import scan_memo
from validators.static.environment import Environment, NotAnEnvironment, load_environment
from validators.static.file_clashes import clash_result
from validators.static.file_facts import FileFactsCache
from validators.static.prefetch import prefetch
from validators.static.verdict import import_scan_inputs, scan_undeclared

GROUP = "static"
MAX_LISTED = 12


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


def run_group(ctx: RunContext) -> list[Result]:
    if ctx.env_path is None:
        return [_result("static.env", "SKIP", "no --env given: nothing to check statically")]
    targets = ctx.options.static.targets
    manifest = ctx.stack.manifest
    abi = AbiOptions(confirm=ctx.options.static.confirm, deep=ctx.options.static.deep)
    return run_static(
        StaticInputs(
            env_path=ctx.env_path,
            stack=manifest.name,
            manifest=manifest,
            lock=lock_files_of(ctx.stack.path, manifest.name).lockfile,
            targets=targets or tuple(manifest.host.target_archs),
            abi=abi,
            cache=FileFactsCache.default(),
        )
    )


_result = functools.partial(make_result, group=GROUP)


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
        out.append(
            _result(
                "static.dists.pins",
                "FAIL" if bad else "PASS",
                "; ".join(bad[:MAX_LISTED])
                if bad
                else f"{findings.pins_checked} manifest pins match the installed versions",
                {"mismatches": findings.pin_mismatches, "missing": findings.pins_missing},
                time.perf_counter() - t,
            )
        )
    t = time.perf_counter()
    lock = inputs.lock or (lock_path(inputs.stack) if inputs.stack else None)
    if lock is None:
        out.append(_result("static.dists.lock", "SKIP", "no stack given: no lock to compare"))
    elif not lock.is_file():
        out.append(
            _result(
                "static.dists.lock",
                "SKIP",
                f"no lock at {lock} (run `{cli_command('lock STACK')}`)",
            )
        )
    else:
        try:
            locked = read_uv_lock(lock)
        except BadInput as exc:
            out.append(_result("static.dists.lock", "ERROR", exc.message))
        else:
            check_lock(locked, env, findings)
            bad = findings.lock_mismatches + [f"{x}: not in the lock" for x in findings.not_in_lock]
            out.append(
                _result(
                    "static.dists.lock",
                    "FAIL" if bad else "PASS",
                    "; ".join(bad[:MAX_LISTED])
                    if bad
                    else f"{len(env.distributions)} installed distributions match {lock.name}",
                    {
                        "lock": str(lock),
                        "mismatches": findings.lock_mismatches,
                        "not_in_lock": findings.not_in_lock,
                    },
                    time.perf_counter() - t,
                )
            )
    t = time.perf_counter()
    check_requirements(env, findings)
    unmet = findings.unmet_requirements
    out.append(
        _result(
            "static.dists.requirements",
            "FAIL" if unmet else "PASS",
            "; ".join(unmet[:MAX_LISTED])
            if unmet
            else "every installed distribution's requirements are met",
            {"unmet": unmet},
            time.perf_counter() - t,
        )
    )
    out.append(clash_result(env.root))
    return out


# --- GPU archs -----------------------------------------------------------------------------


def _arch_results(env: Environment, shared: list[Path], inputs: StaticInputs) -> list[Result]:
    if not inputs.targets:
        return [_result("static.arch", "SKIP", "no target archs (give --targets or a stack)")]
    t = time.perf_counter()
    per_dist = scan_memo(env, shared, inputs.cache, lambda: scan(env, shared, inputs.cache))
    return arch_results(env, per_dist, inputs, time.perf_counter() - t)


def arch_results(
    env: Environment, per_dist: dict[str, DistCode], inputs: StaticInputs, seconds: float
) -> list[Result]:
    """`static.arch.*` results from GPU code per distribution (read from an installed tree, or
    from wheels before install)."""
    if not inputs.targets:
        return [_result("static.arch", "SKIP", "no target archs (give --targets or a stack)")]
    backends = set()
    if inputs.manifest is not None:
        backends = {p.attention_backend or "" for p in inputs.manifest.serving.values()}
    needs_cubins = any(b.startswith("trtllm") for b in backends)
    pinned = (
        {canonicalize_name(n) for n in inputs.manifest.packages}
        if inputs.manifest is not None
        else set()
    )
    out = [
        _dist_arch_result(
            env, label, code, inputs, seconds, needs_cubins=needs_cubins, pinned=pinned
        )
        for label, code in sorted(per_dist.items())
    ]
    if not per_dist:
        out.append(_result("static.arch", "PASS", "no GPU code in this environment", {}, seconds))
    return out


def _dist_arch_result(
    env: Environment,
    label: str,
    code: DistCode,
    inputs: StaticInputs,
    seconds: float,
    *,
    needs_cubins: bool,
    pinned: Collection[str],
) -> Result:
    """One distribution's `static.arch.*` result over every target."""
    check = family_id(STATIC_ARCH, check_key(label))
    listing = {
        short(p, env): [c.label() for c in codes] for p, codes in sorted(code.libraries.items())
    }
    cubins = {c.label(): n for c, n in sorted(code.cubins.items())}
    fails, undecided, notes, unneeded = _per_target(
        env, label, code, inputs, needs_cubins=needs_cubins, pinned=pinned
    )
    # One scan serves every distribution: its time is recorded, not charged to each.
    evidence = {
        "libraries": listing,
        "cubins": cubins,
        "targets": list(inputs.targets),
        "scan_s": round(seconds, 3),
    }
    if code.unreadable:
        evidence["unreadable"] = [f"{p}: {why}" for p, why in code.unreadable]
    if code.unknown:
        evidence["unknown_gpu_code"] = {
            short(p, env): list(why[:MAX_LISTED]) for p, why in sorted(code.unknown.items())
        }
    if fails:
        return _result(check, "FAIL", "; ".join(fails + undecided + notes), evidence)
    if undecided:
        evidence["severity"] = "UNDECIDED"
        return _result(check, "SKIP", "UNDECIDED: " + "; ".join(undecided + notes), evidence)
    archs = sorted({c.label() for c in code.all_codes()})
    covered = [t for t in inputs.targets if t not in unneeded]
    reason = (
        f"covers {', '.join(covered)} (has {', '.join(archs)})"
        if covered
        else f"not needed by the stack on {', '.join(unneeded)}"
    )
    return _result(check, "PASS", reason + (f"; {' | '.join(notes)}" if notes else ""), evidence)


def _per_target(
    env: Environment,
    label: str,
    code: DistCode,
    inputs: StaticInputs,
    *,
    needs_cubins: bool,
    pinned: Collection[str],
) -> tuple[list[str], list[str], list[str], list[str]]:
    """Each target arch judged for one distribution: (fails, undecided, notes, targets the
    stack does not need this distribution's code for)."""
    fails: list[str] = []
    undecided: list[str] = []
    notes: list[str] = []
    unneeded: list[str] = []
    for target in inputs.targets:
        cov = coverage(code, target, env.site_packages)
        if cov.covered_by:
            if cov.uncovered_files:
                notes.append(f"{target}: no code in {'; '.join(cov.uncovered_files[:6])}")
            continue
        only_cubins = not code.libraries and bool(code.cubins)
        has = ", ".join(sorted({c.label() for c in code.all_codes()})) or "nothing readable"
        msg = (
            f"{label} has no SASS that runs on {target} and no PTX that can be JIT-compiled "
            f"for it (has {has})"
        )
        named = arch_named(code)
        if only_cubins and not needs_cubins:
            unneeded.append(target)
            notes.append(
                msg + "; prebuilt-cubin backends (trtllm) are unavailable there, and no "
                "serving profile selects one"
            )
        elif (
            named
            and not label.startswith("(")
            and canonicalize_name(label.split(" ")[0]) not in pinned
        ):
            # kernels built for, and named for, other GPUs (an attention package's
            # ..._sm_100a_x86_64.so an engine pulls in): the engine selects them only there.
            # A package the stack pins stays a FAIL, and so does a file no wheel installed
            # (a kernel built into the env for this stack: its name says which GPU it was
            # built for, and that must be one the stack targets).
            unneeded.append(target)
            notes.append(
                msg + f"; every object is named for the GPU it was built for "
                f"({', '.join(named)}): kernels the engine selects only on those GPUs, "
                "and the stack does not pin this package"
            )
        elif cov.undecided:
            # kernels in a form this reader does not know: no verdict either way
            undecided.append(
                f"{msg} in the fatbins it can read, but it also holds GPU code it cannot "
                f"read: {'; '.join(cov.undecided[:4])}"
            )
        else:
            fails.append(msg)
    return fails, undecided, notes, unneeded


_ARCH_IN_NAME = re.compile(r"(?:^|[_.-])sm_?(\d{2,3}[af]?)(?=[_.-]|$)")


def arch_named(code: DistCode) -> list[str]:
    """The archs the file names of a distribution's GPU libraries state, when every one of
    them states one (`..._sm_100a_x86_64.so`); [] otherwise (sgl-kernel's sm90/ and sm100/
    folders do not count: one of them must serve every GPU)."""
    found: list[str] = []
    for path in code.libraries:
        match = _ARCH_IN_NAME.search(path.name)
        if match is None:
            return []
        found.append(f"sm_{match.group(1)}")
    return sorted(set(found))


def targets_from(values: Sequence[str] | None, manifest: Manifest | None) -> tuple[str, ...]:
    if values:
        return tuple(parse_arch(v) for item in values for v in item.split(",") if v)
    return tuple(manifest.host.target_archs) if manifest is not None else ()
