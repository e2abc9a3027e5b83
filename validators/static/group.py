"""The static group: distributions vs pins and lock, symbol-level ABI, GPU-arch coverage.

No GPU needed. Every check is a Result; an env that cannot be read is one ERROR result.
"""

from __future__ import annotations

import functools
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from stackgate.manifest import Manifest
from validators.context import RunContext
from validators.results import Result, make_result
from validators.static import demangle
from validators.static.abi_check import AbiChecker, AbiFindings, MissingSymbol
from validators.static.arch_check import coverage, scan
from validators.static.dist_check import (
    DistFindings,
    check_lock,
    check_pins,
    check_requirements,
    lock_path,
    read_uv_lock,
    requirement_closure,
)
from validators.static.environment import Environment, NotAnEnvironment, load_environment

GROUP = "static"
MAX_LISTED = 12


@dataclass(frozen=True)
class StaticInputs:
    env_path: Path
    stack: str | None = None
    manifest: Manifest | None = None
    targets: tuple[str, ...] = ()
    lock: Path | None = None


def run_group(ctx: RunContext) -> list[Result]:
    if ctx.env_path is None:
        return [_result("static.env", "SKIP", "no --env given: nothing to check statically")]
    targets = ctx.options.get("targets")
    manifest = ctx.stack.manifest
    return run_static(
        StaticInputs(
            env_path=ctx.env_path,
            stack=manifest.name,
            manifest=manifest,
            targets=tuple(targets.split(",")) if targets else tuple(manifest.host.target_archs),
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
    relevant = None
    if inputs.manifest is not None:
        relevant = requirement_closure(
            env, {name: list(pin.extras) for name, pin in inputs.manifest.packages.items()}
        )
    results.extend(_abi_results(env, shared, relevant))
    results.extend(_arch_results(env, shared, inputs))
    return results


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
                "static.dists.lock", "SKIP", f"no lock at {lock} (run `python -m builder lock`)"
            )
        )
    else:
        try:
            locked = read_uv_lock(lock)
        except (OSError, ValueError) as exc:
            out.append(_result("static.dists.lock", "ERROR", f"cannot read {lock}: {exc}"))
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
    return out


# --- ABI -----------------------------------------------------------------------------------


def _abi_results(env: Environment, shared: list[Path], relevant: set[str] | None) -> list[Result]:
    """One result per distribution with extensions. Problems in distributions the stack's pins
    do not need (per Requires-Dist) are SKIP with the finding, not FAIL: an optional cupy
    module missing cuTENSOR on a shared machine does not make the stack bad."""
    t = time.perf_counter()
    checker = AbiChecker(env)
    extensions, plugins = checker.split_roots(shared)
    findings = checker.check(extensions)
    plugin_findings = checker.check(plugins) if plugins else AbiFindings()
    names = [m.symbol for m in findings.missing_symbols]
    names += [n for m in findings.missing_symbols for n in m.near_misses]
    readable = demangle.demangle(names)
    seconds = time.perf_counter() - t
    out: list[Result] = []

    by_dist: dict[str, list[MissingSymbol]] = defaultdict(list)
    for miss in findings.missing_symbols:
        by_dist[env.owner_label(miss.importer)].append(miss)
    sonames_by_dist: dict[str, list[str]] = defaultdict(list)
    host_sonames: set[str] = set()
    for ms in findings.missing_sonames:
        if ms.host_provided:
            host_sonames.add(ms.soname)
            continue
        sonames_by_dist[env.owner_label(ms.requester)].append(
            f"{ms.requester.name} needs {ms.soname}"
        )
    versions_by_dist: dict[str, list[str]] = defaultdict(list)
    for mv in findings.missing_versions:
        versions_by_dist[env.owner_label(mv.requester)].append(
            f"version {mv.version} not found in {mv.provider.name} (required by {mv.requester.name})"
        )
    ext_by_dist: dict[str, int] = defaultdict(int)
    for ext in extensions:
        ext_by_dist[env.owner_label(ext)] += 1

    for label in sorted(
        set(ext_by_dist) | set(by_dist) | set(sonames_by_dist) | set(versions_by_dist)
    ):
        check = f"static.abi.{_check_key(label)}"
        misses = by_dist.get(label, [])
        sonames = sonames_by_dist.get(label, [])
        versions = versions_by_dist.get(label, [])
        if not (misses or sonames or versions):
            out.append(
                _result(
                    check,
                    "PASS",
                    f"{ext_by_dist[label]} extension modules: every strong import resolves",
                    {},
                    seconds,
                )
            )
            continue
        reasons: list[str] = []
        evidence: dict[str, Any] = {}
        absent = {entry.rsplit(" ", 1)[-1] for entry in sonames}
        if sonames:
            reasons.append(_sonames_reason(env, label, sonames))
            evidence["missing_sonames"] = sonames
        # Symbols versioned against a library that is absent altogether follow from that.
        consequential = [m for m in misses if m.version_file in absent]
        own = [m for m in misses if m.version_file not in absent]
        if consequential:
            reasons.append(f"{len(consequential)} symbols from those missing libraries")
        if own:
            reasons.append(_symbols_reason(env, label, own, readable))
        if misses:
            evidence["missing_symbols"] = [
                {
                    "symbol": readable.get(m.symbol, m.symbol),
                    "mangled": m.symbol,
                    "version": m.version,
                    "importer": str(m.importer),
                    "expected_from": m.expected_from,
                    "provider_package": env.owner_label(m.expected_path)
                    if m.expected_path
                    else None,
                    "exported_instead": [readable.get(n, n) for n in m.near_misses],
                }
                for m in misses
            ]
        if versions:
            reasons.append("; ".join(versions[:MAX_LISTED]))
            evidence["missing_versions"] = versions
        key = canonicalize_name(label.split(" ")[0]) if not label.startswith("(") else None
        if relevant is not None and key is not None and key not in relevant:
            out.append(
                _result(
                    check,
                    "SKIP",
                    "not required by the stack's pinned packages; found: " + " | ".join(reasons),
                    evidence,
                    seconds,
                )
            )
            continue
        out.append(_result(check, "FAIL", " | ".join(reasons), evidence, seconds))

    summary = {
        "extension_modules": findings.checked_roots,
        "objects_checked": findings.checked_objects,
        "imports_checked": findings.imports_checked,
        "host_provided_sonames_absent": sorted(host_sonames),
        "driver_symbols_not_checkable": findings.host_provided_symbols,
        "python_api_unchecked": findings.python_api_unchecked,
        "package_preloaded_sonames": sorted(
            f"{env.owner_label(p)}: {p.name} -> {soname}"
            for p, soname in checker.resolver.package_preloads
        ),
        "demangler": "c++filt" if demangle.available() else "none (binutils not installed)",
        "seconds": round(seconds, 3),
    }
    plugin_notes = [
        f"{env.owner_label(m.requester)}: {m.requester.name} needs {m.soname}"
        for m in plugin_findings.missing_sonames
        if not m.host_provided
    ]
    unreadable = [
        f"{p}: {why}"
        for p, why in env.unreadable + findings.unreadable + plugin_findings.unreadable
    ]
    if unreadable:
        out.append(
            _result(
                "static.abi.unreadable",
                "ERROR",
                f"{len(unreadable)} ELF files could not be read: {unreadable[0]}",
                {"files": unreadable},
            )
        )
    host_note = (
        f"; {', '.join(sorted(host_sonames))} absent (host-provided by the NVIDIA driver, "
        f"{findings.host_provided_symbols} driver-API imports not checkable here)"
        if host_sonames
        else ""
    )
    out.append(
        _result(
            "static.abi.summary",
            "PASS",
            f"{findings.checked_roots} extension modules, {findings.checked_objects} env objects, "
            f"{findings.imports_checked} imports resolved against their DT_NEEDED closures"
            f"{host_note}",
            {**summary, "on_demand_libraries": len(plugins), "on_demand_unmet": plugin_notes[:50]},
            seconds,
        )
    )
    return out


def _check_key(label: str) -> str:
    name = label.split(" ")[0] if not label.startswith("(") else "unowned"
    return canonicalize_name(name).replace("-", "_")


def _symbols_reason(
    env: Environment, label: str, misses: list[MissingSymbol], readable: dict[str, str]
) -> str:
    providers = sorted({env.owner_label(m.expected_path) for m in misses if m.expected_path})
    libs = sorted({m.expected_from for m in misses if m.expected_from})
    modules = sorted({_short(m.importer, env) for m in misses})
    distinct: dict[str, MissingSymbol] = {}
    for m in misses:
        distinct.setdefault(m.symbol, m)
    shown = []
    for m in list(distinct.values())[:MAX_LISTED]:
        text = readable.get(m.symbol, m.symbol)
        if m.version:
            text += f"@{m.version}"
        if m.near_misses:
            text += (
                f" [{m.expected_from} exports {readable.get(m.near_misses[0], m.near_misses[0])}]"
            )
        shown.append(text)
    if providers:
        names = " / ".join(p.split(" ")[0] for p in providers)
        head = (
            f"{label} was built against another {names} than the installed "
            f"{' / '.join(providers)}: "
            f"{len(distinct)} symbols that {len(modules)} of its modules import are not exported "
            f"by {', '.join(libs)}"
        )
    else:
        head = (
            f"{label}: {len(distinct)} imported symbols are defined by nothing in the lookup scope"
        )
    return f"{head}: {'; '.join(shown)}"


def _env_sonames(env: Environment) -> set[str]:
    """Library file names the env ships where preloading finds them (torch/lib, nvidia/*)."""
    site = env.site_packages
    names: set[str] = set()
    for pattern in ("nvidia/*/lib/*.so*", "nvidia/*/*/lib/*.so*", "torch/lib/*.so*"):
        names.update(p.name for p in site.glob(pattern))
    return names


def _sonames_reason(env: Environment, label: str, sonames: list[str]) -> str:
    have = _env_sonames(env)
    hints: list[str] = []
    for entry in sonames:
        soname = entry.rsplit(" ", 1)[-1]
        base, _, major = soname.rpartition(".so.")
        others = sorted(s for s in have if s.startswith(f"{base}.so.") and s != soname)
        if base and others:
            hints.append(
                f"{soname} missing but the env has {', '.join(others)} "
                f"(a CUDA-{major} build beside other CUDA libraries?)"
            )
    distinct = sorted({entry.rsplit(" ", 1)[-1] for entry in sonames})
    text = (
        f"{label}: DT_NEEDED libraries found neither in the env nor on this host's library "
        f"path: {', '.join(distinct[:MAX_LISTED])}"
        + (f" (+{len(distinct) - MAX_LISTED} more)" if len(distinct) > MAX_LISTED else "")
        + f"; needed by {', '.join(sorted({e.split(' needs ')[0] for e in sonames})[:6])}"
    )
    return text + (f" -- {'; '.join(hints[:4])}" if hints else "")


# --- GPU archs -----------------------------------------------------------------------------


def _arch_results(env: Environment, shared: list[Path], inputs: StaticInputs) -> list[Result]:
    if not inputs.targets:
        return [_result("static.arch", "SKIP", "no target archs (give --targets or a stack)")]
    t = time.perf_counter()
    per_dist = scan(env, shared)
    seconds = time.perf_counter() - t
    backends = set()
    if inputs.manifest is not None:
        backends = {p.attention_backend or "" for p in inputs.manifest.serving.values()}
    needs_cubins = any(b.startswith("trtllm") for b in backends)
    out: list[Result] = []
    for label, code in sorted(per_dist.items()):
        check = f"static.arch.{_check_key(label)}"
        listing = {
            _short(p, env): [c.label() for c in codes]
            for p, codes in sorted(code.libraries.items())
        }
        cubins = {c.label(): n for c, n in sorted(code.cubins.items())}
        fails: list[str] = []
        notes: list[str] = []
        unneeded: list[str] = []
        for target in inputs.targets:
            cov = coverage(code, target, env.site_packages)
            if cov.covered_by:
                if cov.uncovered_files:
                    notes.append(f"{target}: no code in {'; '.join(cov.uncovered_files[:6])}")
                continue
            only_cubins = not code.libraries and bool(code.cubins)
            msg = (
                f"{label} has no SASS that runs on {target} and no PTX that can be JIT-compiled "
                f"for it (has {', '.join(sorted({c.label() for c in code.all_codes()}))})"
            )
            if only_cubins and not needs_cubins:
                unneeded.append(target)
                notes.append(
                    msg + "; prebuilt-cubin backends (trtllm) are unavailable there, and no "
                    "serving profile selects one"
                )
            else:
                fails.append(msg)
        evidence = {"libraries": listing, "cubins": cubins, "targets": list(inputs.targets)}
        if code.unreadable:
            evidence["unreadable"] = [f"{p}: {why}" for p, why in code.unreadable]
        if fails:
            out.append(_result(check, "FAIL", "; ".join(fails + notes), evidence, seconds))
            continue
        archs = sorted({c.label() for c in code.all_codes()})
        covered = [t for t in inputs.targets if t not in unneeded]
        reason = (
            f"covers {', '.join(covered)} (has {', '.join(archs)})"
            if covered
            else f"not needed by the stack on {', '.join(unneeded)}"
        )
        out.append(
            _result(
                check,
                "PASS",
                reason + (f"; {' | '.join(notes)}" if notes else ""),
                evidence,
                seconds,
            )
        )
    if not per_dist:
        out.append(_result("static.arch", "PASS", "no GPU code in this environment", {}, seconds))
    return out


def _short(path: Path, env: Environment) -> str:
    try:
        return str(path.resolve().relative_to(env.site_packages.resolve()))
    except ValueError:
        return str(path)


def targets_from(values: Sequence[str] | None, manifest: Manifest | None) -> tuple[str, ...]:
    if values:
        return tuple(v for item in values for v in item.split(",") if v)
    return tuple(manifest.host.target_archs) if manifest is not None else ()
