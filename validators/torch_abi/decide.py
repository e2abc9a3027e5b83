"""One (package version, torch version) pair: loads / breaks / undecidable, from the
pre-install check (validators.lockcheck) run on a virtual lock of the package's wheel beside
torch's closure. Every wheel's facts come from the facts cache (keyed by sha256) or from
byte ranges of the wheel, so a wheel is read once ever."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from stackgate.lock.torch_abi import PairVerdict
from stackgate.lock.wheels import LockedWheel, LockWheels
from validators.core.results import Result
from validators.elf.elf_symbols import ElfObject, read_elf
from validators.elf.facts_cache import FactsCache
from validators.elf.source import DiskSource
from validators.lockcheck.check import LockInputs, run_lock_check
from validators.lockcheck.scan import ScanReport, WheelScan
from validators.static.abi_results import check_key


class _ElfMemo:
    """Host ELF files read once per process: the interpreter and the system libraries every
    pair of a matrix resolves against (12 files, ~1/4 of a warm pair's CPU)."""

    def __init__(self) -> None:
        self._objects: dict[Path, ElfObject] = {}

    def elf(self, path: Path) -> ElfObject:
        hit = self._objects.get(path)
        if hit is None:
            hit = self._objects[path] = read_elf(path)
        return hit


def host_source() -> DiskSource:
    """One source of the host's files for the pairs one process judges."""
    return DiskSource(reader=_ElfMemo())


_CUDA = re.compile(r"^libcudart\.so\.(\d+)$")  # the runtime names the CUDA major


@dataclass(frozen=True)
class PairInputs:
    package: str
    version: str
    torch: str
    wheel: LockedWheel | None  # None: no wheel for the target
    closure: LockWheels
    cache: FactsCache
    targets: tuple[str, ...] = ()
    interpreter: Path | None = None
    offline: bool = False
    jobs: int = 6
    no_wheel_reason: str = ""
    host: DiskSource | None = None  # the host's libraries, read once for many pairs


def decide(inputs: PairInputs) -> PairVerdict:
    base: dict[str, Any] = {
        "package": inputs.package,
        "version": inputs.version,
        "torch": inputs.torch,
    }
    if inputs.wheel is None:
        return PairVerdict(
            **base,
            verdict="breaks",
            kind="no-wheel",
            reason=inputs.no_wheel_reason,
            first=inputs.no_wheel_reason,
        )
    wheels = [w for w in inputs.closure.wheels if w.name != inputs.wheel.name] + [inputs.wheel]
    lock = LockWheels(wheels=wheels, no_wheel=[], python=inputs.closure.python)
    # one virtual place per torch: its closure's objects sit at the same paths for every
    # package version, so a memoizing cache builds them once (validators.torch_abi.memo)
    virtual = Path("/stackgate-compat") / f"torch-{inputs.torch}"
    results, report = run_lock_check(
        LockInputs(
            lock=virtual / "uv.lock",
            wheels=lock,
            cache=inputs.cache,
            offline=inputs.offline,
            jobs=inputs.jobs,
            targets=inputs.targets,
            interpreter=inputs.interpreter,
            only=frozenset({canonicalize_name(inputs.package)}),
            host=inputs.host,
        )
    )
    base["wheel"] = inputs.wheel.filename
    verdict = judge(inputs, {r.check: r for r in results}, report)
    return verdict.model_copy(update={**base, **_cuda(inputs, report)})


def _cuda(inputs: PairInputs, report: ScanReport) -> dict[str, Any]:
    needed: set[str] = set()
    provided: set[str] = set()
    fetched = 0
    for scan in report.wheels:
        mine = scan.wheel.name == inputs.wheel.name if inputs.wheel else False
        if mine:
            fetched += scan.bytes_fetched
        for cached in scan.facts.values():
            for soname in cached.needed if mine else [cached.soname or ""]:
                m = _CUDA.match(soname)
                if m:
                    (needed if mine else provided).add(m.group(1))
    return {
        "cuda_needed": sorted(needed),
        "torch_cuda": sorted(provided),
        "bytes_fetched": report.bytes_fetched,
        "wheel_bytes": inputs.wheel.size if inputs.wheel else 0,
    }


def _first_cause(r: Result) -> tuple[str, str]:
    """A missing symbol first: the libraries the evidence lists may be optional ones (the
    static verdict's WARN class: torchaudio's libsox backend) beside the symbol that fails."""
    ev = r.evidence
    if ev.get("missing_symbols"):
        m = ev["missing_symbols"][0]
        where = f" (not exported by {m['expected_from']})" if m.get("expected_from") else ""
        return "symbol", f"{Path(m['importer']).name} imports {m['symbol']}{where}"
    if ev.get("missing_versions"):
        return "version-node", str(ev["missing_versions"][0])
    if ev.get("missing_sonames"):
        return "library", str(ev["missing_sonames"][0])
    if ev.get("taken_down_by"):
        return "taken-down", "below it: " + ", ".join(ev["taken_down_by"])
    return "other", r.reason[:200]


def judge(inputs: PairInputs, by: dict[str, Result], report: ScanReport) -> PairVerdict:
    """The pair's verdict from the lock check's results (text of the reason only here)."""
    key = check_key(inputs.package)
    common: dict[str, Any] = {
        "package": inputs.package,
        "version": inputs.version,
        "torch": inputs.torch,
    }
    cause = _unjudgeable(inputs, by, key)
    if cause is not None:
        return PairVerdict(**common, verdict="undecidable", kind=cause[0], reason=cause[1])
    return _binaries_verdict(inputs, by, report, common)


def _unjudgeable(inputs: PairInputs, by: dict[str, Result], key: str) -> tuple[str, str] | None:
    """(kind, reason) where the lock check could not look at the package's binaries: the
    fetch or a malformed wheel errored, the integrity check failed, torch's own closure does
    not load, or one of the package's files was unreadable."""
    for check, status, kind in (
        ("static.lock.fetch", "ERROR", "fetch"),
        ("static.lock.wheels", "ERROR", "malformed"),
        ("static.lock.integrity", "FAIL", "integrity"),
    ):
        result = by.get(check)
        if result is not None and result.status == status:
            return kind, result.reason
    torch = by.get("static.abi.torch")
    if torch is not None and torch.status == "FAIL":
        why = f"torch {inputs.torch}'s own closure does not load here: {torch.reason[:300]}"
        return "torch-closure", why
    unreadable = by.get("static.abi.unreadable")
    mine = inputs.wheel.name.replace("-", "_") if inputs.wheel else key
    if unreadable is not None and any(mine in f for f in unreadable.evidence.get("files", [])):
        return "unreadable", unreadable.reason
    return None


def _binaries_verdict(
    inputs: PairInputs, by: dict[str, Result], report: ScanReport, common: dict[str, Any]
) -> PairVerdict:
    """breaks (a missing symbol or library, no kernel for the targets), undecidable (arch
    undecided, or a libtorch extension that declares a torch this is not) or loads."""
    key = check_key(inputs.package)
    scan = next(
        (w for w in report.wheels if inputs.wheel and w.wheel.name == inputs.wheel.name), None
    )
    declared = _declared(scan, inputs.torch, inputs.closure.python)
    links_torch = scan is not None and any(
        n.startswith(("libtorch", "libc10")) for f in scan.facts.values() for n in f.needed
    )
    stable = by.get(f"static.abi.stable.{key}")
    extra: dict[str, Any] = {"declared": declared, "stable_abi": stable is not None}
    abi = by.get(f"static.abi.{key}")
    if abi is not None and abi.status == "FAIL":
        kind, first = _first_cause(abi)
        return PairVerdict(
            **common, **extra, verdict="breaks", kind=kind, reason=abi.reason, first=first
        )
    arch = by.get(f"static.arch.{key}")
    if arch is not None and arch.status == "FAIL":
        return PairVerdict(
            **common,
            **extra,
            verdict="breaks",
            kind="arch",
            reason=arch.reason,
            first=arch.reason[:200],
        )
    if arch is not None and arch.status == "SKIP" and inputs.targets and "undecided" in arch.reason:
        return PairVerdict(
            **common, **extra, verdict="undecidable", kind="arch", reason=arch.reason
        )
    if declared and links_torch and stable is None:
        # torchvision 0.23.0 (requires torch==2.8.0) beside torch 2.9.1: every symbol resolves
        # and the load still dies with SIGSEGV (benchmarks/compat/results/truth_compare.md). A changed
        # struct layout or vtable under an unchanged mangled name is in no symbol table.
        return PairVerdict(
            **common,
            **extra,
            verdict="undecidable",
            kind="declared-torch",
            reason=(
                f"every symbol resolves, but its C++ extensions link libtorch and it declares "
                f"{declared}: a layout change under unchanged symbol names can still crash "
                "at load, which the binaries' symbol tables cannot show"
            ),
        )
    if abi is None:
        reason = "no extension modules or libraries of its own link anything missing"
        if scan is None or not scan.facts:
            reason = "no ELF objects: nothing to load but Python"
        return PairVerdict(**common, **extra, verdict="loads", reason=reason)
    return PairVerdict(**common, **extra, verdict="loads", reason=abi.reason[:400])


def _declared(scan: WheelScan | None, torch: str, python: tuple[int, int]) -> str:
    """The package's own Requires-Dist on torch (for Linux x86_64), where this torch does not
    meet it: "requires torch==2.8.0"."""
    if scan is None or scan.listing is None:
        return ""
    target = {
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "python_version": f"{python[0]}.{python[1]}",
        "python_full_version": f"{python[0]}.{python[1]}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
    }
    for text in scan.listing.requires:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) != "torch":
            continue
        if req.marker is not None:
            try:
                if not req.marker.evaluate({**target, "extra": ""}):
                    continue
            except Exception:  # a marker naming an unknown variable: not ours to judge
                continue
        if req.specifier and not req.specifier.contains(torch, prereleases=True):
            return f"requires torch{req.specifier}"
    return ""
