"""Turn typed ABI findings into the static group's `static.abi.*` results (text only here)."""

from __future__ import annotations

import functools
import mmap
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from stackgate.installed import Distribution
from validators.core.checks import STATIC_ABI, family_id
from validators.core.results import Result, Status, make_result
from validators.elf.elf_symbols import ElfReadError
from validators.elf.file_facts_cache import FileFactsCache
from validators.elf.source import ObjectSource
from validators.static import demangle
from validators.static.abi_check import AbiChecker, AbiFindings
from validators.static.confirm import LoadRun, Prewarmed, Step, StepResult, run_steps
from validators.static.confirm_cache import cached_loads, loads_key, store_loads
from validators.static.dist_check import dependents
from validators.static.driver_stub import StubBuildError, build_stubs
from validators.static.driver_userland import ENV_VAR as USERLAND_VAR
from validators.static.driver_userland import find_userland
from validators.static.environment import Environment
from validators.static.findings import MissingSoname, MissingSymbol
from validators.static.imports import SourceTree
from validators.static.loader import HOST_PROVIDED, closure, system_library_dirs
from validators.static.overlay import designed_overlay
from validators.static.resolution_cache import Resolution, resolve
from validators.static.verdict import (
    PackageVerdict,
    apply_loads,
    classify,
    cuda_major_of,
    installed_tree,
    plan,
    walk_imports,
)

MAX_LISTED = 12
_result = functools.partial(make_result, group="static")


def check_key(label: str) -> str:
    name = label.split(" ")[0] if not label.startswith("(") else "unowned"
    return canonicalize_name(name).replace("-", "_")


def site_relative(path: Path, env: Environment) -> str:
    try:
        return str(path.resolve().relative_to(env.site_packages.resolve()))
    except ValueError:
        return str(path)


@dataclass(frozen=True)
class AbiOptions:
    confirm: bool = True  # load what a finding is about, in a child of the env's interpreter
    deep: bool = False  # also load every extension module of every distribution
    timeout_s: float = 600.0


def abi_results(
    env: Environment,
    shared: list[Path],
    relevant: set[str] | None,
    source: ObjectSource | None = None,
    options: AbiOptions | None = None,
    cache: FileFactsCache | None = None,
    prewarmed: Prewarmed | None = None,
    meanwhile: Callable[[], object] | None = None,
    texts: Callable[[Path], str | None] | None = None,
    trees: Callable[[Distribution], SourceTree | None] | None = None,
) -> list[Result]:
    """One result per distribution with ELF files. Problems in distributions the stack's pins
    do not need (per Requires-Dist) are SKIP with the finding, not FAIL. WARN and INFO
    verdicts (optional dependencies, variants, other-Python modules, refuted findings) are
    PASS results whose reason starts with the severity; evidence["severity"] says it too."""
    options = options or AbiOptions()
    t = time.perf_counter()
    # plugins (torch.ops.load_library, ctypes) are checked like extensions: in their scope
    resolution = resolve(
        env,
        shared,
        lambda: AbiChecker(env, source=source, reader=cache, texts=texts, trees=trees),
        cache,
        memo=source is None,
    )
    extensions, plugins, findings = resolution.extensions, resolution.plugins, resolution.findings
    names = [m.symbol for m in findings.missing_symbols]
    names += [n for m in findings.missing_symbols for n in m.near_misses]
    readable = demangle.demangle(names)
    have = set(resolution.shipped)
    roots = [p for p in [*extensions, *plugins]]
    verdicts = classify(
        env,
        findings,
        roots,
        have,
        deep=options.deep,
        cache=cache,
        loads=resolution.checker().package_loads,
    )
    walk_imports(verdicts, trees or functools.partial(installed_tree, env.site_packages))
    seconds = time.perf_counter() - t
    load_note, load_seconds = "", 0.0
    # `meanwhile` (the GPU-arch scan) runs in a thread while this thread mostly waits for the
    # confirming child: the child's imports and the scan use both cores
    with ThreadPoolExecutor(1) as side:
        beside = side.submit(meanwhile) if meanwhile is not None else None
        if options.confirm and source is None:
            native = [r for r in roots if r in resolution.native]  # no aarch64 stubs to load
            load_note, load_seconds = _confirm(
                env,
                verdicts,
                native,
                findings,
                options,
                lambda root: _reaches_driver(resolution.checker(), root),
                cache,
                prewarmed,
            )
    if beside is not None:
        beside.result()  # its exception, if any, is the caller's
    out = [
        # One resolution serves every package: its time is the summary's, not each package's.
        _package_result(env, v, relevant, readable, have, 0.0)
        for v in verdicts.values()
        if v.extensions or v.severity != "PASS"
    ]
    out.extend(_summary_results(env, resolution, seconds, load_note, load_seconds))
    return out


def _summary_results(
    env: Environment, resolution: Resolution, seconds: float, load_note: str, load_seconds: float
) -> list[Result]:
    """The env-wide results after the packages': clashes, unreadable files, the summary."""
    out: list[Result] = []
    extensions, plugins, findings = resolution.extensions, resolution.plugins, resolution.findings
    host_sonames = sorted({m.soname for m in findings.missing_sonames if m.host_provided})
    summary = {
        "extension_modules": len(extensions),
        "plugins_checked": len(plugins),
        "objects_checked": findings.checked_objects,
        "imports_checked": findings.imports_checked,
        "host_provided_sonames_absent": host_sonames,
        "driver_symbols_not_checkable": findings.host_provided_symbols,
        "python_api_unchecked": findings.python_api_unchecked,
        "resolved_in_package_scope": len(findings.scope_resolved),
        "other_python_modules": len(findings.other_python),
        "package_preloaded_sonames": sorted(
            f"{env.owner_label(p)}: {p.name} -> {soname}"
            for p, soname in resolution.package_preloads
        ),
        "demangler": "c++filt" if demangle.available() else "none (binutils not installed)",
        "seconds": round(seconds, 3),
        "confirm_seconds": round(load_seconds, 3),
        # hit: the env's files and every folder and file the resolution read are those of an
        # earlier run (resolution_cache.py); stored: resolved and kept; off: no cache / not on disk
        "resolution_memo": resolution.memo,
    }
    if resolution.changed:
        summary["resolution_memo_changed"] = resolution.changed
    out.extend(_clash_results(env, seconds))
    unreadable = [f"{p}: {why}" for p, why in env.unreadable + findings.unreadable]
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
            f"{len(extensions)} extension modules and {len(plugins)} plugins, "
            f"{findings.checked_objects} env objects, "
            f"{findings.imports_checked} imports resolved in their scopes{host_note}{load_note}",
            summary,
            seconds + load_seconds,
        )
    )
    return out


def _clash_results(env: Environment, seconds: float) -> list[Result]:
    """An extension module two distributions install with different contents: the loser
    imports the winner's build (cuda-python 12.6.2.post1 overwriting cuda-bindings 13.5.0's
    _internal/utils.so, so `import cuda.core` fails: a C-API break no symbol check sees)."""
    hurt: dict[str, list[str]] = {}
    paths: dict[str, list[str]] = {}
    by_design: dict[str, list[str]] = {}
    for clash in env.clashes:
        loser = clash.overwritten()
        if loser is None:
            continue
        winner = clash.second if loser is clash.first else clash.first
        pin = designed_overlay(env, winner, loser)
        if pin is not None:
            by_design.setdefault(loser.label(), []).append(
                f"{site_relative(clash.path, env)} is {winner.label()}'s copy ({winner.name} requires {pin})"
            )
            continue
        hurt.setdefault(loser.label(), []).append(
            f"{site_relative(clash.path, env)} is {winner.label()}'s copy"
        )
        paths.setdefault(loser.label(), []).append(str(clash.path))
    out = [
        _result(
            family_id(STATIC_ABI, f"{check_key(label)}.files"),
            "FAIL",
            f"{label}: {len(files)} of its extension files were overwritten by another "
            f"distribution's build: {'; '.join(files[:MAX_LISTED])}",
            {"severity": "FAIL", "overwritten": files, "failing_objects": paths[label]},
            seconds,
        )
        for label, files in sorted(hurt.items())
    ]
    out += [
        _result(
            family_id(STATIC_ABI, f"{check_key(label)}.files"),
            "PASS",
            f"INFO: {label}: {len(files)} of its extension files are a variant laid over it by "
            f"a package that pins this exact version: {'; '.join(files[:MAX_LISTED])}",
            {"severity": "INFO", "overwritten": files},
            seconds,
        )
        for label, files in sorted(by_design.items())
        if label not in hurt
    ]
    return out


def _reaches_driver(checker: AbiChecker, root: Path) -> bool:
    """Does loading `root` reach the driver's libcuda.so.1 (absent here: a stub stands in)?
    Through DT_NEEDED (its closure names libcuda or the CUDA runtime), or through a dlopen
    of it by name (the static CUDA runtime's "libcuda.so.1" string in an object of the
    closure: onnxruntime-gpu 1.22's CUDA provider). Asked only about modules that crashed."""
    try:
        cl = closure(checker.resolver, checker.resolver.load(root))
    except ElfReadError:
        return False
    names = [*(s for _, s in cl.missing), *(o.soname or o.path.name for o in cl.order)]
    if any(n in HOST_PROVIDED or n.startswith("libcudart.so") for n in names):
        return True
    for obj in cl.order:
        try:
            with obj.path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                if m.find(b"libcuda.so") >= 0:
                    return True
        except (OSError, ValueError):
            continue
    return False


def driver_stub_folder(names: set[str] | frozenset[str]) -> Path | None:
    """The stub driver folder for the children's LD_LIBRARY_PATH (driver_stub.py), None when
    the host has a real libcuda.so.1; StubBuildError when it cannot be built."""
    if any((Path(d) / "libcuda.so.1").exists() for d in system_library_dirs()):
        return None
    return build_stubs(names).folder


# imported by the prewarmed child after torch (confirm.Prewarmed.warm): what the packages a
# confirming run loads (torchao, vLLM, SGLang) import first and torch itself does not
PREWARM_MODULES = ("torch._dynamo",)


def _has_module(site: Path, name: str) -> bool:
    folder = site.joinpath(*name.split("."))
    return (folder / "__init__.py").is_file() or folder.with_suffix(".py").is_file()


def prewarms(env: Environment, options: AbiOptions) -> bool:
    """Whether a cold run starts a confirming child early (prewarm_confirming)."""
    return options.confirm and env.interpreter is not None and "torch" in env.distributions


def prewarm_confirming(
    env: Environment, options: AbiOptions, driver_names: frozenset[str]
) -> Prewarmed | None:
    """Start the first confirming child (`import torch`) now, while the env is still being
    read, when a run would start it that way: an env with torch and an interpreter, loads
    on. `driver_names`: the driver API the env's objects import (prefetch.py); _confirm uses
    the child only if the resolution finds exactly these (the same stub folder), and the
    caller discards it when no confirming run needs it."""
    if not prewarms(env, options):
        return None
    try:
        stub_dir = driver_stub_folder(driver_names)
    except StubBuildError:
        return None
    try:
        return Prewarmed(
            env.root / "bin" / "python",
            [Step("import", "torch")],
            site_packages=env.site_packages,
            library_path=stub_dir,
            warm=[m for m in PREWARM_MODULES if _has_module(env.site_packages, m)],
        )
    except OSError:
        return None


def _confirm(
    env: Environment,
    verdicts: dict[str, PackageVerdict],
    roots: list[Path],
    findings: AbiFindings,
    options: AbiOptions,
    reaches_driver: Callable[[Path], bool],
    cache: FileFactsCache | None = None,
    prewarmed: Prewarmed | None = None,
) -> tuple[str, float]:
    """Run the confirming loads (or take an earlier run's outcome from `cache`, keyed by the
    identity of the env's files); returns a note for the summary and the seconds spent."""
    if env.interpreter is None:
        return "; no interpreter: findings not confirmed by a load", 0.0
    by_label: dict[str, list[Path]] = {}
    for r in roots:
        if not (findings.other_python and r in findings.other_python):
            by_label.setdefault(env.owner_label(r), []).append(r)
    scoped = frozenset(x.importer for x in findings.scope_resolved)
    steps, mine = plan(env, verdicts, by_label, deep=options.deep, scoped=scoped)
    if not [s for s in steps if s.kind != "import" or s.name != "torch"]:
        return "", 0.0
    try:
        stub_dir = driver_stub_folder(findings.host_provided_names)
    except StubBuildError as exc:
        return f"; confirming loads not run: {exc}", 0.0
    python = env.root / "bin" / "python"
    key = loads_key(env, python, steps, stub_dir, find_userland()) if cache is not None else None
    run = cached_loads(cache, key, steps) if cache is not None and key is not None else None
    how = " (cached: the env's files and the steps are those of an earlier run)"
    if run is None:
        how = ""
        run = _run_confirming(steps, python, env, stub_dir, reaches_driver, options, prewarmed)
        if cache is not None and key is not None:
            store_loads(cache, key, run)
    apply_loads(verdicts, mine, run.results, env.site_packages)
    early = "; the first started while the env was read" if run.prewarmed and not how else ""
    seconds = 0.0 if how else run.seconds
    return (
        f"; {len(steps)} confirming load steps in {run.children} child processes "
        f"({run.seconds:.1f} s{early}){how}",
        seconds,
    )


def _run_confirming(
    steps: list[Step],
    python: Path,
    env: Environment,
    stub_dir: Path | None,
    reaches_driver: Callable[[Path], bool],
    options: AbiOptions,
    prewarmed: Prewarmed | None = None,
) -> LoadRun:
    run = run_steps(
        python,
        steps,
        site_packages=env.site_packages,
        library_path=stub_dir,
        timeout=options.timeout_s,
        first=prewarmed,
    )
    # A crash may come from loading two variants of one module into one process (sgl_kernel's
    # sm90/ and sm100/ common_ops register the same ops); a module that loads alone in a
    # fresh child after `import torch` does not crash at load.
    setup = [x for x in steps[:1] if x.kind == "import" and x.name == "torch"]
    for crash in [x for x in run.results if x.outcome == "crash" and x.step.kind != "import"]:
        alone = run_steps(
            python,
            [*setup, crash.step],
            site_packages=env.site_packages,
            library_path=stub_dir,
            timeout=options.timeout_s,
        )
        run.seconds += alone.seconds
        run.children += alone.children
        if any(a.step == crash.step and a.outcome == "ok" for a in alone.results):
            run.results[run.results.index(crash)] = StepResult(
                crash.step,
                "ok",
                f"loads alone (in one process with its siblings: {crash.error[:120]})",
            )
    if stub_dir is not None:
        _recheck_with_real_driver(run, steps, python, env, stub_dir, reaches_driver, options)
    return run


def _recheck_with_real_driver(
    run: LoadRun,
    steps: list[Step],
    python: Path,
    env: Environment,
    stub_dir: Path,
    reaches_driver: Callable[[Path], bool],
    options: AbiOptions,
) -> None:
    """A module that crashes at load under the stub driver is loaded again with a real driver
    userland (driver_userland.py) before the crash counts, repeating the steps that loaded before
    it. Without a userland, a crash of a module that reaches libcuda.so.1 is not confirmed
    (stub-crash: a WARN); one that does not reach the driver crashes on its own.
    """
    crashes = [x for x in run.results if x.outcome == "crash" and x.step.kind != "import"]
    if not crashes:
        return
    userland = find_userland()
    ok = {r.step for r in run.results if r.outcome == "ok"}
    for crash in crashes:
        index = run.results.index(crash)
        if not (crash.step.path and reaches_driver(Path(crash.step.path))):
            continue  # the stub is not in its way: the crash is the module's own
        if userland is None:
            run.results[index] = StepResult(
                crash.step,
                "stub-crash",
                f"{crash.error} (under the stub driver, and no real driver userland here to "
                f"confirm it: set {USERLAND_VAR} or run .ci/bootstrap)",
            )
            continue
        before = [s for s in steps[: steps.index(crash.step)] if s in ok]
        again = run_steps(
            python,
            [*before, crash.step],
            site_packages=env.site_packages,
            library_path=[userland.folder, stub_dir],
            timeout=options.timeout_s,
        )
        run.seconds += again.seconds
        run.children += again.children
        outcome = next((a for a in again.results if a.step == crash.step), None)
        if outcome is not None and outcome.outcome == "ok":
            run.results[index] = StepResult(
                crash.step,
                "ok",
                f"loads with {userland.describe()}; crashed only under the stub driver "
                f"({crash.error[:120]})",
            )
        elif outcome is not None and outcome.outcome in ("crash", "timeout"):
            run.results[index] = StepResult(
                crash.step, outcome.outcome, f"{crash.error} (also with {userland.describe()})"
            )
        else:
            why = outcome.error[:160] if outcome is not None else "no result"
            run.results[index] = StepResult(
                crash.step,
                "stub-crash",
                f"{crash.error} under the stub driver; with {userland.describe()} the load "
                f"did not get as far ({why})",
            )


@dataclass
class _Findings:
    """What one package's result says, gathered step by step: FAIL reasons, warnings, notes
    and the evidence behind them."""

    evidence: dict[str, Any]
    fails: list[str] = field(default_factory=list)
    warns: list[str] = field(default_factory=list)
    infos: list[str] = field(default_factory=list)


def _package_result(
    env: Environment,
    v: PackageVerdict,
    relevant: set[str] | None,
    readable: dict[str, str],
    have: set[str],
    seconds: float,
) -> Result:
    check = family_id(STATIC_ABI, check_key(v.label))
    found = _Findings({"severity": v.severity})
    _load_findings(env, v, found)
    _link_findings(env, v, readable, found)
    _soname_findings(env, v, have, found)
    _variant_notes(v, found)
    loads = [r for r in v.loads if r.step.kind != "import" or r.outcome != "ok"]
    if v.loads:
        found.evidence["loads"] = [
            {"step": _step_text(r, env), "outcome": r.outcome, "error": r.error[:400]}
            for r in v.loads
        ]
    _confirmation(env, v, loads, found)
    severity = v.severity
    status: Status
    if severity == "FAIL":
        status = "FAIL"
        _fail_evidence(env, v, loads, found)
        reason = " | ".join(found.fails + [f"WARN {w}" for w in found.warns])
    elif severity == "PASS":
        return _result(
            check,
            "PASS",
            f"{v.extensions} modules: every strong import resolves in its scope",
            found.evidence,
            seconds,
        )
    else:
        status = "PASS"
        reason = f"{severity}: " + " | ".join(found.warns + found.infos)
    key = canonicalize_name(v.label.split(" ")[0]) if not v.label.startswith("(") else None
    if status == "FAIL" and relevant is not None and key is not None and key not in relevant:
        return _result(
            check,
            "SKIP",
            "not required by the stack's pinned packages; found: " + reason,
            found.evidence,
            seconds,
        )
    return _result(check, status, reason, found.evidence, seconds)


def _load_findings(env: Environment, v: PackageVerdict, found: _Findings) -> None:
    """Crashes at load and imports of packages the package does not declare."""
    if v.crashed:
        how = sorted({r.error.split(" (", 1)[0] for r in v.crashed})
        found.fails.append(
            f"crashes at load ({', '.join(how)}): "
            + ", ".join(_step_text(r, env) for r in v.crashed)
        )
    for name in v.undeclared_failed:
        found.fails.append(
            f"import fails: {v.label} imports {name} at import time "
            f"({site_relative(v.undeclared[name], env)}) without declaring it, and {name} is not installed: "
            + "; ".join(
                f"{_step_text(r, env)}: {r.error[:160]}"
                for r in v.loads
                if r.outcome == "error" and f"No module named '{name}'" in r.error
            )[:400]
        )
    for name, where in v.undeclared_unconfirmed.items():
        found.warns.append(
            f"{v.label} imports {name} at import time ({site_relative(where, env)}) without declaring "
            f"it, and {name} is not installed (no load ran to confirm)"
        )
    if v.stub_crashes:
        found.warns.append(
            "crashes at load, not confirmed: "
            + "; ".join(f"{_step_text(r, env)}: {r.error[:300]}" for r in v.stub_crashes)
        )
    if v.crashed and v.unmet:
        found.fails.append("likely why: " + "; ".join(v.unmet))


def _link_findings(
    env: Environment, v: PackageVerdict, readable: dict[str, str], found: _Findings
) -> None:
    """Symbols and symbol versions no provider defines, objects taken down by a library below
    them, and the modules that cannot load for it."""
    fails, evidence = found.fails, found.evidence
    if v.symbols:
        fails.append(_symbols_reason(env, v.label, v.symbols, readable))
        evidence["missing_symbols"] = [_symbol_evidence(env, m, readable) for m in v.symbols]
    if v.versions:
        versions = [
            f"version {x.version} not found in {x.provider.name} (required by {x.requester.name})"
            for x in v.versions
        ]
        fails.append("; ".join(dict.fromkeys(versions[:MAX_LISTED])))
        evidence["missing_versions"] = versions
    if (v.symbols or v.versions) and v.unmet and not v.crashed:
        # a symbol defined by nothing because a library's wheel was forced past its pin: the
        # unmet pin on that wheel is the cause to fix
        fails.append("likely why: " + "; ".join(v.unmet))
    if v.taken_down_by:
        causes = sorted({f"{b.name} ({env.owner_label(b)})" for _, b in v.taken_down_by})
        fails.append(
            f"{len({r for r, _ in v.taken_down_by})} of its objects cannot load because "
            f"{', '.join(causes)} below them cannot"
        )
        evidence["taken_down_by"] = causes
    if v.modules_lacking:
        fails.append(_impact_reason(v))
        evidence["impact"] = v.impact or "UNKNOWN"
        evidence["impact_from_imports"] = v.walked_impact or "UNKNOWN"
        evidence["impact_from_load"] = v.loaded_impact or "NOT RUN"
        evidence["modules_that_cannot_load"] = v.modules_lacking


def _soname_findings(env: Environment, v: PackageVerdict, have: set[str], found: _Findings) -> None:
    """Libraries no one provides: needed, optional (or needed after all), and the libraries
    the package loads itself."""
    fails, warns, evidence = found.fails, found.warns, found.evidence
    if v.needed_sonames:
        because = f" (not optional: {'; '.join(v.needed_because)})" if v.needed_because else ""
        fails.append(_sonames_reason(v.label, v.needed_sonames, have) + because)
    # an "optional" library that the package's import fails on (confirmed without other
    # static candidates) is needed after all: say so, never "imports without it"
    needed_after_all = bool(v.optional_sonames and v.confirmed and not v.candidates)
    if needed_after_all:
        fails.append(_sonames_reason(v.label, v.optional_sonames, have))
    if v.takes_down:
        fails.append(f"takes down with it: {', '.join(sorted(v.takes_down))}")
    if v.optional_sonames and not needed_after_all:
        # say what was seen: a load only where one ran (not with --no-confirm, not on a lock)
        imported = [r.step.name for r in v.loads if r.step.kind == "import" and r.outcome == "ok"]
        grounds = "no other package's objects need it and no requirement of the package is missing"
        seen = f"; import {', '.join(imported)} works without it" if imported else f"; {grounds}"
        notes = f"; {'; '.join(v.load_notes)}" if v.load_notes else ""
        warns.append(
            "optional: "
            + _sonames_reason(v.label, v.optional_sonames, have)
            + f" (an optional dependency or a host-library backend{seen}{notes})"
        )
    warns += v.own_loads_unknown
    found.infos += v.loaded_by_own_import
    if v.loaded_by_own_import:
        evidence["loaded_by_own_import"] = v.loaded_by_own_import
    if v.own_loads_unknown:
        evidence["own_loads_unknown"] = v.own_loads_unknown
    soname_lists = [*v.needed_sonames, *v.optional_sonames, *v.variant_sonames]
    if soname_lists:
        evidence["missing_sonames"] = [f"{m.requester.name} needs {m.soname}" for m in soname_lists]


def _variant_notes(v: PackageVerdict, found: _Findings) -> None:
    """Objects built for another CUDA, torch or Python (a sibling serves this env) and
    requirements the env does not meet, as notes."""
    infos = found.infos
    if v.variant_sonames:
        infos.append(
            f"{len({m.requester for m in v.variant_sonames})} modules are builds for another "
            f"CUDA major ({', '.join(sorted({m.soname for m in v.variant_sonames})[:4])}); "
            "a sibling variant resolves and the package picks one at run time"
        )
    if v.variant_objects:
        infos.append(
            f"{len(v.variant_objects)} objects are builds for another CUDA/torch version "
            f"({', '.join(sorted({x.name for x in v.variant_objects})[:3])}); a sibling build "
            "resolves and the package loads the matching one at run time"
        )
    if v.other_python:
        infos.append(
            f"{len(v.other_python)} extension modules for another Python ABI "
            f"({', '.join(sorted({p.name for p in v.other_python})[:3])}), never imported here"
        )
    if v.unmet and not v.crashed:
        loaded = " (its modules load)" if v.loads and not v.crashed else ""
        infos.append("; ".join(v.unmet) + loaded)


def _confirmation(
    env: Environment, v: PackageVerdict, loads: list[StepResult], found: _Findings
) -> None:
    """What the confirming loads said: a refutation turns the FAIL reasons into a note; a
    confirmation names the load that failed."""
    if v.candidates and v.confirmed is False:
        found.infos.insert(
            0,
            "refuted by a load: every module in question loads after import torch "
            "and the package's own imports: " + " | ".join(found.fails),
        )
        found.fails = []
    elif v.confirmed and found.fails:
        bad = [r for r in loads if r.outcome == "error"]
        bad.sort(key=lambda r: (r.undefined_symbol is None, r.step.kind == "import"))
        if bad:
            found.fails.append(
                f"confirmed by a load: {_step_text(bad[0], env)}: {bad[0].error[:200]}"
            )
    elif v.confirmed and not found.fails:
        bad = [r for r in loads if r.outcome != "ok" and "cannot open shared object" not in r.error]
        found.fails.append(
            "a load fails: " + "; ".join(f"{_step_text(r, env)}: {r.error[:200]}" for r in bad[:3])
        )


def _fail_evidence(
    env: Environment, v: PackageVerdict, loads: list[StepResult], found: _Findings
) -> None:
    """A failing package's dependents (down with it) and the objects that fail."""
    if v.dist is not None:
        down = sorted(d.label() for d in dependents(env, v.dist) if d.label() not in v.takes_down)
        if down:
            found.evidence["required_by"] = down
            found.fails.append(
                f"required by {len(down)} more (down too where they import it): "
                + ", ".join(down[:MAX_LISTED])
            )
    failing = [*v.objects_to_confirm(), *(Path(r.step.path) for r in v.crashed if r.step.path)]
    failing += [
        Path(r.step.path)
        for r in loads
        if r.outcome == "error"
        and r.step.path
        and (r.undefined_symbol is not None or "expected C function" in r.error)
    ]
    found.evidence["failing_objects"] = sorted({str(x) for x in failing})


def _impact_reason(v: PackageVerdict) -> str:
    """BROKEN / DEGRADED, how it is known (a load, the import-time walk of the sources, or
    both), and the modules that cannot load, each with the library it lacks."""
    listed = [f"{m} (lacks {', '.join(s)})" for m, s in sorted(v.modules_lacking.items())]
    count = len(listed)
    mods = f"{count} module{'s' if count > 1 else ''} cannot load: " + ", ".join(
        listed[:MAX_LISTED]
    )
    walked = v.import_walk
    tops = walked[0] if walked is not None and walked[0] else []
    if not tops:
        tops = sorted({r.step.name for r in v.loads if r.step.kind == "import"} - {"torch"})
    shown = ", ".join(tops) or "the package"
    how: list[str] = []
    if v.loaded_impact is not None:
        how.append("a load: " + ("it works" if v.loaded_impact == "DEGRADED" else "it fails"))
    if v.walked_impact == "DEGRADED":
        how.append("no import-time import of its modules reaches them")
    elif v.walked_impact == "BROKEN" and walked is not None:
        how.append(f"its import-time imports reach {', '.join(sorted(walked[1]))}")
    if v.impact == "DEGRADED":
        return f"DEGRADED: `import {shown}` works ({'; '.join(how)}), but {mods}"
    if v.impact == "BROKEN":
        return f"BROKEN: `import {shown}` fails ({'; '.join(how)}), and {mods}"
    return (
        f"{mods}; whether `import {shown}` still works (DEGRADED) or not (BROKEN) is not "
        "known: no load ran and its sources were not read"
    )


def _step_text(r: StepResult, env: Environment) -> str:
    if r.step.kind == "import":
        return f"import {r.step.name}"
    return site_relative(Path(r.step.path), env)


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
    modules = sorted({site_relative(m.importer, env) for m in misses})
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


def _site_rel(path: Path) -> str:
    """nvidia/cublas/lib/libcublas.so.12 from a path under site-packages."""
    parts = path.parts
    return (
        "/".join(parts[parts.index("site-packages") + 1 :])
        if "site-packages" in parts
        else str(path)
    )


def _sonames_reason(label: str, sonames: list[MissingSoname], have: set[str]) -> str:
    """`have`: library file names the env ships where preloading finds them."""
    hints: list[str] = []
    for miss in sonames:
        base, _, major = miss.soname.rpartition(".so.")
        others = sorted(s for s in have if s.startswith(f"{base}.so.") and s != miss.soname)
        if not (base and others):
            continue
        cuda = cuda_major_of(miss.soname)
        hints.append(
            f"{miss.soname} missing but the env has {', '.join(others)} "
            + (
                f"(a CUDA-{cuda} build beside other CUDA libraries?)"
                if cuda is not None
                else f"(built for {base.removeprefix('lib')} {major}, the env has another major)"
            )
        )
    unreached = {m.soname: m.installed_at for m in sonames if m.installed_at is not None}
    distinct = sorted({m.soname for m in sonames} - set(unreached))
    requesters = sorted({m.requester.name for m in sonames})
    parts = []
    if distinct:
        parts.append(
            "DT_NEEDED libraries found neither in the env nor on this host's library path: "
            + ", ".join(distinct[:MAX_LISTED])
            + (f" (+{len(distinct) - MAX_LISTED} more)" if len(distinct) > MAX_LISTED else "")
        )
    if unreached:
        where = [f"{s} (at {_site_rel(p)})" for s, p in sorted(unreached.items())]
        parts.append(
            "DT_NEEDED libraries the env installs where its loader does not look (no "
            "RUNPATH to them, and no import that runs first loads them): "
            + ", ".join(where[:MAX_LISTED])
        )
    text = f"{label}: {'; '.join(parts)}; needed by {', '.join(requesters[:6])}"
    return text + (f" -- {'; '.join(dict.fromkeys(hints[:4]))}" if hints else "")
