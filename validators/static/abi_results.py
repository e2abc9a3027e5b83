"""Turn typed ABI findings into the static group's `static.abi.*` results (text only here)."""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from validators.results import Result, make_result
from validators.static import demangle
from validators.static.abi_check import AbiChecker, AbiFindings
from validators.static.environment import Environment
from validators.static.findings import MissingSoname, MissingSymbol, PackageFindings, by_package
from validators.static.source import ObjectSource

MAX_LISTED = 12
_result = functools.partial(make_result, group="static")


def check_key(label: str) -> str:
    name = label.split(" ")[0] if not label.startswith("(") else "unowned"
    return canonicalize_name(name).replace("-", "_")


def short(path: Path, env: Environment) -> str:
    try:
        return str(path.resolve().relative_to(env.site_packages.resolve()))
    except ValueError:
        return str(path)


def abi_results(
    env: Environment,
    shared: list[Path],
    relevant: set[str] | None,
    source: ObjectSource | None = None,
) -> list[Result]:
    """One result per distribution with extensions. Problems in distributions the stack's pins
    do not need (per Requires-Dist) are SKIP with the finding, not FAIL: an optional cupy
    module missing cuTENSOR on a shared machine does not make the stack bad."""
    t = time.perf_counter()
    checker = AbiChecker(env, source=source)
    extensions, plugins = checker.split_roots(shared)
    findings = checker.check(extensions)
    plugin_findings = checker.check(plugins) if plugins else AbiFindings()
    names = [m.symbol for m in findings.missing_symbols]
    names += [n for m in findings.missing_symbols for n in m.near_misses]
    readable = demangle.demangle(names)
    seconds = time.perf_counter() - t
    have = set(checker.resolver.preloaded)
    packages = by_package(
        env,
        extensions,
        findings.missing_symbols,
        findings.missing_sonames,
        findings.missing_versions,
    )
    out = [
        _package_result(env, pkg, relevant, readable, have, seconds) for pkg in packages.values()
    ]
    host_sonames = sorted({m.soname for m in findings.missing_sonames if m.host_provided})
    summary = {
        "extension_modules": findings.checked_roots,
        "objects_checked": findings.checked_objects,
        "imports_checked": findings.imports_checked,
        "host_provided_sonames_absent": host_sonames,
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
        f"; {', '.join(host_sonames)} absent (host-provided by the NVIDIA driver, "
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


def _package_result(
    env: Environment,
    pkg: PackageFindings,
    relevant: set[str] | None,
    readable: dict[str, str],
    have: set[str],
    seconds: float,
) -> Result:
    check = f"static.abi.{check_key(pkg.label)}"
    if pkg.clean:
        return _result(
            check,
            "PASS",
            f"{pkg.extensions} extension modules: every strong import resolves",
            {},
            seconds,
        )
    reasons: list[str] = []
    evidence: dict[str, Any] = {}
    absent = pkg.absent_sonames()
    if pkg.sonames:
        reasons.append(_sonames_reason(pkg.label, pkg.sonames, have))
        evidence["missing_sonames"] = [f"{m.requester.name} needs {m.soname}" for m in pkg.sonames]
    # Symbols versioned against a library that is absent altogether follow from that.
    consequential = [m for m in pkg.symbols if m.version_file in absent]
    own = [m for m in pkg.symbols if m.version_file not in absent]
    if consequential:
        reasons.append(f"{len(consequential)} symbols from those missing libraries")
    if own:
        reasons.append(_symbols_reason(env, pkg.label, own, readable))
    if pkg.symbols:
        evidence["missing_symbols"] = [_symbol_evidence(env, m, readable) for m in pkg.symbols]
    if pkg.versions:
        versions = [
            f"version {v.version} not found in {v.provider.name} (required by {v.requester.name})"
            for v in pkg.versions
        ]
        reasons.append("; ".join(versions[:MAX_LISTED]))
        evidence["missing_versions"] = versions
    key = canonicalize_name(pkg.label.split(" ")[0]) if not pkg.label.startswith("(") else None
    if relevant is not None and key is not None and key not in relevant:
        return _result(
            check,
            "SKIP",
            "not required by the stack's pinned packages; found: " + " | ".join(reasons),
            evidence,
            seconds,
        )
    return _result(check, "FAIL", " | ".join(reasons), evidence, seconds)


def _symbol_evidence(
    env: Environment, m: MissingSymbol, readable: dict[str, str]
) -> dict[str, Any]:
    return {
        "symbol": readable.get(m.symbol, m.symbol),
        "mangled": m.symbol,
        "version": m.version,
        "importer": str(m.importer),
        "expected_from": m.expected_from,
        "provider_package": env.owner_label(m.expected_path) if m.expected_path else None,
        "exported_instead": [readable.get(n, n) for n in m.near_misses],
    }


def _symbols_reason(
    env: Environment, label: str, misses: list[MissingSymbol], readable: dict[str, str]
) -> str:
    providers = sorted({env.owner_label(m.expected_path) for m in misses if m.expected_path})
    libs = sorted({m.expected_from for m in misses if m.expected_from})
    modules = sorted({short(m.importer, env) for m in misses})
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


def _sonames_reason(label: str, sonames: list[MissingSoname], have: set[str]) -> str:
    """`have`: library file names the env ships where preloading finds them."""
    hints: list[str] = []
    for miss in sonames:
        base, _, major = miss.soname.rpartition(".so.")
        others = sorted(s for s in have if s.startswith(f"{base}.so.") and s != miss.soname)
        if base and others:
            hints.append(
                f"{miss.soname} missing but the env has {', '.join(others)} "
                f"(a CUDA-{major} build beside other CUDA libraries?)"
            )
    distinct = sorted({m.soname for m in sonames})
    requesters = sorted({m.requester.name for m in sonames})
    text = (
        f"{label}: DT_NEEDED libraries found neither in the env nor on this host's library "
        f"path: {', '.join(distinct[:MAX_LISTED])}"
        + (f" (+{len(distinct) - MAX_LISTED} more)" if len(distinct) > MAX_LISTED else "")
        + f"; needed by {', '.join(requesters[:6])}"
    )
    return text + (f" -- {'; '.join(dict.fromkeys(hints[:4]))}" if hints else "")
