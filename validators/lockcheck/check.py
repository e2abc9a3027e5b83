"""The static verdict for a lock, before install: the wheels' ELF facts at the paths they
would be installed to, resolved by the static group's own resolver and arch check, so the
results carry the same check ids and texts as `validators static --env`."""

from __future__ import annotations

import functools
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from stackgate.bounded_http import Limits
from stackgate.installed import Distribution
from stackgate.lock.wheels import LockWheels
from stackgate.manifest import Manifest
from stackgate.python_finder import find_host_python
from validators.core.results import Result, make_result
from validators.elf.facts_cache import FactsCache
from validators.elf.fatbin import GpuCode
from validators.elf.file_facts_cache import file_identity
from validators.elf.object_facts import ObjectFacts, source_from_facts
from validators.elf.source import DiskSource
from validators.lockcheck.scan import Scanner, ScanReport, WheelScan
from validators.lockcheck.stable_abi import stable_abi_results
from validators.lockcheck.verdict_cache import cached_results, store_results, verdict_key
from validators.lockcheck.wheel_sources import WheelSources
from validators.static.abi_results import abi_results, check_key
from validators.static.arch_check import DistCode
from validators.static.arch_results import arch_results
from validators.static.dist_check import (
    DistFindings,
    check_pins,
    check_requirements,
    requirement_closure,
)
from validators.static.environment import Environment
from validators.static.loader import system_library_dirs
from validators.static.resolution_cache import answers_of

GROUP = "static"
VIRTUAL_ROOT = Path("/stackgate-lock-virtual")
_result = functools.partial(make_result, group=GROUP)


@dataclass(frozen=True)
class LockInputs:
    lock: Path
    wheels: LockWheels
    cache: FactsCache
    offline: bool = False
    jobs: int = 6
    manifest: Manifest | None = None
    targets: tuple[str, ...] = ()
    interpreter: Path | None = None
    limits: Limits = field(default_factory=Limits)
    # check only these distributions' objects (canonical names); empty: every distribution.
    # `validators compat` judges one package beside torch's closure, not the closure itself
    only: frozenset[str] = frozenset()
    # keep/reuse the whole verdict of an all-cached run (verdict_cache.py); the CLI's choice
    memo: bool = False
    # the host's files outside the virtual env (the interpreter, libc, libstdc++): None reads
    # them anew; `validators compat` passes one memoizing source for all the pairs it judges
    host: DiskSource | None = None


def installed_path(site: Path, root: Path, member: str) -> Path | None:
    """Where a wheel member lands (purelib/platlib data folders to site-packages)."""
    parts = member.split("/")
    if len(parts) > 2 and parts[0].endswith(".data"):
        if parts[1] in ("purelib", "platlib"):
            return site.joinpath(*parts[2:])
        if parts[1] == "data":
            return root.joinpath(*parts[2:])
        return None
    return site.joinpath(*parts)


def find_interpreter(python: tuple[int, int]) -> Path | None:
    """The host's CPython X.Y, standing in for the env's (its C-API exports are the same):
    stackgate.python_finder's, never downloaded; None when the host has none, or the one found
    is not an ELF executable (a wrapper script exports nothing)."""
    found = find_host_python(f"{python[0]}.{python[1]}")
    return found.path if found is not None and _is_elf(found.path) else None


def _is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def run_lock_check(inputs: LockInputs, progress: Any = None) -> tuple[list[Result], ScanReport]:
    """The pre-install verdict. With inputs.memo, from verdict_cache.py when nothing it depends
    on changed since a run that read everything from the cache (the report is then empty:
    no wheel was scanned)."""
    key, changed = None, None
    if inputs.memo:
        key = verdict_key(inputs.cache, inputs.wheels.wheels, _inputs_text(inputs))
        hit, changed = cached_results(inputs.cache, key) if key is not None else (None, None)
        if hit is not None:
            return hit, ScanReport([], 0.0, inputs.offline)
    host = inputs.host if inputs.host is not None else DiskSource()
    results, report = _run_lock_check(inputs, progress, host)
    from_cache = all(w.fetch_mode == "cache" and not w.lacking for w in report.wheels)
    if key is not None and report.wheels and from_cache and not report.errors:
        # the run may have added this torch to the shim index: the key as it is now
        after = verdict_key(inputs.cache, inputs.wheels.wheels, _inputs_text(inputs))
        if after is not None:
            results = store_results(
                inputs.cache, after, inputs.wheels.wheels, answers_of(host), results, changed
            )
    return results, report


def _inputs_text(inputs: LockInputs) -> str:
    """Everything of the inputs the verdict depends on besides the cached facts."""
    interp = inputs.interpreter
    manifest = inputs.manifest.model_dump_json() if inputs.manifest is not None else ""
    return json.dumps(
        [
            str(inputs.lock.resolve()),
            list(inputs.wheels.python),
            sorted(inputs.wheels.no_wheel),
            inputs.offline,
            list(inputs.targets),
            sorted(inputs.only),
            str(interp),
            file_identity(interp) if interp is not None else None,
            manifest,
            system_library_dirs(),  # ld.so.conf: where host libraries are looked for
        ]
    )


def _run_lock_check(
    inputs: LockInputs, progress: Any, host: DiskSource
) -> tuple[list[Result], ScanReport]:
    python = inputs.wheels.python
    root = VIRTUAL_ROOT / inputs.lock.resolve().parent.name / "env"
    site = root / "lib" / f"python{python[0]}.{python[1]}" / "site-packages"
    scanner = Scanner(
        inputs.cache,
        offline=inputs.offline,
        virtual_site=site,
        jobs=inputs.jobs,
        progress=progress,
        limits=inputs.limits,
    )
    try:
        report = scanner.scan(inputs.wheels.wheels)
    finally:
        scanner.close()
    results = [_fetch_result(inputs, report)]
    read, usable = _read_results(report)
    results.extend(read)
    lacking = [f"{w.wheel.filename}: {m}" for w in report.wheels for m in w.lacking]
    if not usable or report.errors or lacking:
        return results, report
    results.extend(_judge(inputs, report, host, root, site))
    return results, report


def _read_results(report: ScanReport) -> tuple[list[Result], bool]:
    """What reading the wheels found wrong, and whether their facts can be judged: not when a
    wheel is malformed (bad input: exit 2) or an object matches neither its zip entry nor
    the lock; a member that differs from RECORD only is a warning."""
    if report.malformed:
        return [
            _result(
                "static.lock.wheels",
                "ERROR",
                f"{len(report.malformed)} locked wheels cannot be read as wheels: "
                + "; ".join(report.malformed[:6]),
                {"malformed": report.malformed},
            )
        ], False
    integrity = [m for w in report.wheels for m in w.integrity]
    if integrity:
        return [
            _result(
                "static.lock.integrity",
                "FAIL",
                f"{len(integrity)} objects do not match their zip entry or the lock: "
                + "; ".join(integrity[:6]),
                {"mismatches": integrity},
            )
        ], False
    stale = [
        f"{w.wheel.filename}: {member}: sha256 {cached.read.record_mismatch} does not match RECORD"
        for w in report.wheels
        for member, cached in sorted(w.facts.items())
        if cached.read is not None and cached.read.record_mismatch
    ]
    if not stale:
        return [], True
    return [
        _result(
            "static.lock.integrity",
            "PASS",
            f"WARN: {len(stale)} objects differ from their wheel's RECORD while matching "
            "the zip's size and CRC32: the wheel was published so (an installer writes "
            "these bytes; they are the ones judged here): " + "; ".join(stale[:6]),
            {"severity": "WARN", "record_mismatches": stale},
        )
    ], True


def _judge(
    inputs: LockInputs, report: ScanReport, host: DiskSource, root: Path, site: Path
) -> list[Result]:
    """The static group's checks over the virtual env the wheels' facts make: pins, ABI,
    GPU archs, the stable-ABI shims."""
    env, facts, codes = _virtual_env(inputs, report, root, site)
    source = source_from_facts(facts, roots=(root,), fallback=host)
    texts = {
        site / member: text
        for scan in report.wheels
        for member, text in scan.sources.items()
        if text is not None
    }
    relevant = None
    if inputs.manifest is not None:
        relevant = requirement_closure(
            env, {name: list(pin.extras) for name, pin in inputs.manifest.packages.items()}
        )
    shared = env.shared_objects()
    if inputs.only:
        shared = [p for p in shared if _owned_by(env, p, inputs.only)]
    results = _pins(env, inputs)
    # the sources of a package whose modules cannot load are read only then (wheel_sources.py)
    with WheelSources(
        inputs.cache, inputs.wheels.wheels, offline=inputs.offline, limits=inputs.limits
    ) as sources:
        results.extend(
            abi_results(env, shared, relevant, source=source, texts=texts.get, trees=sources.tree)
        )
    t = time.perf_counter()
    arch = arch_results(env, codes, inputs.targets, inputs.manifest, time.perf_counter() - t)
    results.extend(_undecided_arch(arch, env, report, site, root))
    results.extend(stable_abi_results(env, facts, inputs.cache))
    return results


def _owned_by(env: Environment, path: Path, names: frozenset[str]) -> bool:
    dist = env.owner(path)
    return dist is not None and canonicalize_name(dist.name) in names


def _undecided_arch(
    results: list[Result], env: Environment, report: ScanReport, site: Path, root: Path
) -> list[Result]:
    """An arch FAIL of a distribution with GPU code read only in part (a fatbin section past
    the bytes fetched) is not a verdict: it becomes a SKIP that says which files."""
    partial: dict[str, list[str]] = {}
    for scan in report.wheels:
        for member, cached in scan.facts.items():
            path = installed_path(site, root, member)
            if path is not None and cached.read is not None and cached.read.gpu_code == "partial":
                partial.setdefault(f"static.arch.{check_key(env.owner_label(path))}", []).append(
                    member
                )
    out: list[Result] = []
    for r in results:
        files = partial.get(r.check)
        if r.status == "FAIL" and files:
            r = r.model_copy(
                update={
                    "status": "SKIP",
                    "reason": undecided_reason(r.check, files, r.evidence),
                    "evidence": {**r.evidence, "gpu_code_read_in_part": files},
                }
            )
        elif files and r.status == "PASS":
            r = r.model_copy(
                update={
                    "reason": r.reason + f"; GPU code of {len(files)} files read only in part",
                    "evidence": {**r.evidence, "gpu_code_read_in_part": files},
                }
            )
        out.append(r)
    return out


def undecided_reason(check: str, files: list[str], evidence: dict[str, Any]) -> str:
    """The SKIP of an arch check whose GPU code was read only in part. It says what is not
    known, never the FAIL's "has no SASS that runs on 9.0a ... (has )": read as a verdict,
    that told a reader torch 2.9.1 cannot run on an H100."""
    seen: set[str] = set()
    for codes in (evidence.get("libraries") or {}).values():
        seen.update(str(c) for c in codes)
    seen.update(str(c) for c in (evidence.get("cubins") or {}))
    targets = ", ".join(str(t) for t in evidence.get("targets") or []) or "the stack's targets"
    part = f"holds {', '.join(sorted(seen))}" if seen else "holds no GPU code this reader could see"
    more = f" and {len(files) - 4} more" if len(files) > 4 else ""
    return (
        f"undecided before install: the GPU code of {', '.join(files[:4])}{more} lies past the "
        f"bytes read; the part read {part}. Whether {check.removeprefix('static.arch.')} runs "
        f"on {targets} is known after install (static --env)"
    )


def _pins(env: Environment, inputs: LockInputs) -> list[Result]:
    findings = DistFindings()
    check_requirements(env, findings)
    unmet = findings.unmet_requirements
    requirements = _result(
        "static.dists.requirements",
        "FAIL" if unmet else "PASS",
        "; ".join(unmet[:12]) if unmet else "every locked distribution's requirements are met",
        {"unmet": unmet},
    )
    if inputs.manifest is None:
        return [
            _result("static.dists.pins", "SKIP", "no stack given: no pins to compare"),
            requirements,
        ]
    check_pins(inputs.manifest, env, findings)
    bad = findings.pin_mismatches + findings.pins_missing
    return [
        _result(
            "static.dists.pins",
            "FAIL" if bad else "PASS",
            "; ".join(bad[:12])
            if bad
            else f"{findings.pins_checked} manifest pins match the locked versions",
            {"mismatches": findings.pin_mismatches, "missing": findings.pins_missing},
        ),
        requirements,
    ]


def _virtual_env(
    inputs: LockInputs, report: ScanReport, root: Path, site: Path
) -> tuple[Environment, list[ObjectFacts], dict[str, DistCode]]:
    distributions: dict[str, Distribution] = {}
    owners: dict[Path, Distribution] = {}
    facts: list[ObjectFacts] = []
    codes: dict[str, DistCode] = {}
    for scan in report.wheels:
        listing = scan.listing
        assert listing is not None
        name = listing.name or scan.wheel.name
        version = listing.version or scan.wheel.version
        dist = Distribution(
            name=name,
            version=version,
            dist_info=site / f"{name.replace('-', '_')}-{version}.dist-info",
            requires=tuple(listing.requires),
        )
        distributions[canonicalize_name(name)] = dist
        label = dist.label()
        for member, cached in sorted(scan.facts.items()):
            path = installed_path(site, root, member)
            if path is None or not cached.is_elf or cached.machine == "190":
                continue
            owners[path] = dist
            obj = inputs.cache.object_facts(cached, path)
            facts.append(obj)
            partial = cached.read is not None and cached.read.gpu_code == "partial"
            if obj.gpu_codes or partial:
                # a library whose fatbin sections were not reached still counts, so the
                # distribution gets its (undecided) arch result as in the installed check
                codes.setdefault(label, DistCode()).libraries[path] = list(obj.gpu_codes)
        # a library not reached counts only where nothing else of the distribution has GPU
        # code (else the arch result would list it as "only " with no code)
        dist_codes = codes.get(label)
        if dist_codes is not None and any(dist_codes.libraries.values()):
            for path in [p for p, c in dist_codes.libraries.items() if not c]:
                del dist_codes.libraries[path]
        cubins = _cubin_counter(scan)
        if cubins:
            codes.setdefault(label, DistCode()).cubins.update(cubins)
        for member, why in scan.unreadable:
            path = installed_path(site, root, member)
            if path is not None:
                codes.setdefault(label, DistCode()).unreadable.append((path, why))
    env = Environment(
        root=root,
        site_packages=site,
        interpreter=inputs.interpreter,
        distributions=distributions,
        owners=owners,
        objects=tuple(f.path for f in facts),
    )
    env.unreadable.extend(
        (site / member, why) for scan in report.wheels for member, why in scan.unreadable
    )
    return env, facts, codes


def _cubin_counter(scan: WheelScan) -> Counter[GpuCode]:
    from validators.elf.cached_facts import CachedFacts

    out: Counter[GpuCode] = Counter()
    for label in scan.cubin_codes.values():
        if label:
            out.update(CachedFacts(gpu_codes=[label]).codes())
    return out


def _read_objects(report: ScanReport) -> list[dict[str, Any]]:
    """How each ELF member was read (the evidence of static.lock.fetch), in wheel order."""
    objects: list[dict[str, Any]] = []
    for scan in report.wheels:
        for member, cached in sorted(scan.facts.items()):
            read = cached.read
            if read is None:
                continue
            objects.append(
                {
                    "wheel": scan.wheel.filename,
                    "wheel_url": scan.wheel.url,
                    "wheel_sha256": scan.wheel.sha256,
                    "member": member,
                    "member_bytes": read.member_size,
                    "compressed_bytes": read.compressed_size,
                    "compressed_read": read.compressed_read,
                    "whole_member_read": read.whole,
                    "record_sha256_checked": read.sha256_checked,
                    "read": "whole"
                    if read.whole
                    else (
                        f"prefix {read.prefix_bytes} B"
                        + (f" + tail from {read.tail_from}" if read.tail_from is not None else "")
                    ),
                    "gpu_code": read.gpu_code,
                }
            )
    return objects


def _fetch_result(inputs: LockInputs, report: ScanReport) -> Result:
    objects = _read_objects(report)
    partial = sum(1 for o in objects if not o["whole_member_read"])
    lacking = [f"{w.wheel.filename}: {m}" for w in report.wheels for m in w.lacking]
    modes = sorted({w.fetch_mode for w in report.wheels if w.fetch_mode != "cache"})
    evidence: dict[str, Any] = {
        "lock": str(inputs.lock),
        "wheels": len(report.wheels),
        "wheels_without_a_compatible_wheel": inputs.wheels.no_wheel,
        "wheel_bytes_total": report.wheel_bytes,
        "bytes_fetched": report.bytes_fetched,
        "fetched_fraction": round(report.bytes_fetched / max(1, report.wheel_bytes), 5),
        "requests": sum(w.requests for w in report.wheels),
        "retries": sum(w.retries for w in report.wheels),
        "wheel_sha256_checked": [w.wheel.filename for w in report.wheels if w.wheel_sha256_checked],
        "fetch_modes": modes or ["cache only"],
        "streamed_wheels": [
            w.wheel.filename for w in report.wheels if w.fetch_mode.startswith("streamed")
        ],
        "objects_from_partial_members": partial,
        "offline": inputs.offline,
        "lacking": lacking,
        "errors": report.errors,
        "cubins_from_names": sum(w.cubins_from_names for w in report.wheels),
        "objects": objects,
        "seconds": round(report.seconds, 3),
    }
    mb = report.bytes_fetched / 1e6
    head = (
        f"{len(report.wheels)} wheels, {sum(len(w.facts) for w in report.wheels)} ELF objects; "
        f"fetched {mb:.1f} MB of {report.wheel_bytes / 1e6:.1f} MB "
        f"({100 * report.bytes_fetched / max(1, report.wheel_bytes):.2f}%)"
    )
    if any(w.fetch_mode.startswith("streamed") for w in report.wheels):
        head += "; a server ignored Range: those wheels were streamed whole (and checked against the lock's sha256)"
    if partial:
        head += f"; {partial} objects read from part of their member (not checkable against RECORD)"
    if report.errors:
        return _result(
            "static.lock.fetch",
            "ERROR",
            f"{len(report.errors)} wheels could not be read: {report.errors[0]}",
            evidence,
            report.seconds,
        )
    if lacking:
        return _result(
            "static.lock.fetch",
            "ERROR",
            f"offline and the cache lacks {len(lacking)} objects: {', '.join(lacking[:6])}"
            + (" ..." if len(lacking) > 6 else ""),
            evidence,
            report.seconds,
        )
    return _result("static.lock.fetch", "PASS", head, evidence, report.seconds)
