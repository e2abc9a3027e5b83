"""Wheel variants (PEP 825 draft): the properties a wheel publishes in its
`*.dist-info/variant.json` (and its index's `<name>-<version>-variants.json`), read with
variantlib, each audited against the wheel's binaries as the pre-install reader sees them:

- `nvidia :: sm_arch :: 120_real` / `120_virtual`: SASS that runs on sm_120 / PTX that JITs
  to it, in the wheel's ELF objects or cubins;
- `nvidia :: cuda_version_lower_bound :: 12.8` / `cuda_version_upper_bound :: 13`: the CUDA
  majors its objects' DT_NEEDED name (libcudart.so.12 ...) within the bounds (a minor is in no
  soname: only the major is checked);
- `abi_dependency :: torch :: 2.9`: it loads beside the newest torch release of that series
  (the `validators compat` verdict: every torch symbol it imports is exported).

A property of another namespace or feature is listed as not audited, never as holding."""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict
from variantlib.constants import (
    VALIDATION_WHEEL_NAME_REGEX,
    VARIANT_ABI_DEPENDENCY_NAMESPACE,
    VARIANT_DIST_INFO_FILENAME,
)
from variantlib.errors import ValidationError as VariantError
from variantlib.variant_dist_info import VariantDistInfo
from variantlib.variants_json import VariantsJson

from stackgate.lock.wheels import LockedWheel, LockWheels
from validators.elf.cached_facts import CachedFacts
from validators.elf.facts_cache import FactsCache
from validators.elf.fatbin import GpuCode
from validators.lockcheck.http_ranges import FetchError, RemoteFile, make_client
from validators.lockcheck.scan import Scanner, WheelScan
from validators.lockcheck.wheel_reader import RemoteWheel
from validators.lockcheck.zip_directory import ZipFormatError
from validators.torch_abi.closure import ClosureError, torch_closure
from validators.torch_abi.decide import PairInputs, decide
from validators.torch_abi.index import IndexError_, IndexRow, project_files, project_rows

ClaimVerdict = Literal["holds", "false", "not-audited"]
_ARCH = re.compile(r"^(\d{2,3})([af]?)_(real|virtual)$")
# the libraries whose soname major is the CUDA major (cuFFT's .so.11 is CUDA 12's: not here)
_CUDA_MAJOR = re.compile(r"^lib(?:cudart|cublas|cublasLt|nvrtc)\.so\.(\d+)$")
MAX_VARIANT_JSON = 1 << 20


class VariantFileError(Exception):
    """A variant file that variantlib refuses, or that cannot be read."""


class ClaimCheck(BaseModel):
    model_config = ConfigDict(extra="forbid")

    claim: str  # "namespace :: feature :: value", or "variants.json"
    verdict: ClaimVerdict
    evidence: str


def _check(claim: str, verdict: ClaimVerdict, evidence: str) -> ClaimCheck:
    return ClaimCheck(claim=claim, verdict=verdict, evidence=evidence)


class WheelAudit(BaseModel):
    model_config = ConfigDict(extra="forbid")

    wheel: str
    version: str
    label: str
    properties: list[str]
    claims: list[ClaimCheck]
    error: str = ""  # why the wheel's variant.json could not be read (claims then empty)
    bytes_fetched: int = 0

    @property
    def false(self) -> list[ClaimCheck]:
        return [c for c in self.claims if c.verdict == "false"]


class VariantReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    package: str
    index: str
    files: int  # every file the project page lists
    wheels: int
    labelled_wheels: int  # wheel names with a variant label
    variants_json: list[str]  # the index's <name>-<version>-variants.json files
    audits: list[WheelAudit]
    not_audited: list[str]  # labelled wheels not for Linux x86_64 (this reader's ELF target)


def variant_label(filename: str) -> str | None:
    """The variant label of a wheel file name (variantlib's PEP 825 pattern), else None."""
    match = VALIDATION_WHEEL_NAME_REGEX.fullmatch(filename)
    if match is None:
        return None
    label = match.group("variant_label")
    return str(label) if label else None


def wheel_version(filename: str) -> Version | None:
    match = VALIDATION_WHEEL_NAME_REGEX.fullmatch(filename)
    if match is None:
        return None
    try:
        return Version(match.group("ver"))
    except InvalidVersion:
        return None


def parse_dist_info(data: bytes, label: str | None) -> list[str]:
    """The properties of a wheel's variant.json, "namespace :: feature :: value" each, by
    variantlib (which also checks the label the file name gives)."""
    try:
        info = VariantDistInfo(data.decode("utf-8"), expected_label=label)
        props: Iterable[Any] = info.variant_desc.properties
        return sorted(str(p.to_str()) for p in props)
    except (VariantError, ValueError, KeyError, TypeError, AssertionError) as exc:
        raise VariantFileError(f"{VARIANT_DIST_INFO_FILENAME}: {exc}") from None


def parse_index_variants(data: bytes) -> dict[str, list[str]]:
    """An index's variants.json: label -> its properties (variantlib)."""
    try:
        info = VariantsJson(json.loads(data.decode("utf-8")))
        variants: dict[str, Any] = dict(info.variants)
        return {
            str(label): sorted(str(p.to_str()) for p in desc.properties)
            for label, desc in variants.items()
        }
    except (VariantError, ValueError, KeyError, TypeError, AssertionError) as exc:
        raise VariantFileError(f"variants.json: {exc}") from None


def _split(prop: str) -> tuple[str, str, str]:
    namespace, feature, value = (part.strip() for part in prop.split("::"))
    return namespace, feature, value


def audit_arch(value: str, codes: list[GpuCode], partial: list[str]) -> ClaimCheck:
    claim = f"nvidia :: sm_arch :: {value}"
    match = _ARCH.match(value)
    if match is None:
        return _check(claim, "not-audited", f"{value!r}: not NN_real")
    sm, suffix, form = int(match.group(1)), match.group(2), match.group(3)
    kind = "sass" if form == "real" else "ptx"
    major, minor = sm // 10, sm % 10
    have = sorted({c.label() for c in codes})
    shown = ", ".join(have) or "no GPU code"
    ok = [
        c
        for c in codes
        if c.kind == kind
        and (c.sm == sm and c.suffix == suffix if suffix else c.runs_on(major, minor))
    ]
    what = "SASS that runs on" if kind == "sass" else "PTX that JITs to"
    if ok:
        return _check(
            claim, "holds", f"{what} sm_{sm}{suffix}: {', '.join(sorted({c.label() for c in ok}))}"
        )
    if partial:
        return _check(
            claim,
            "not-audited",
            f"no {what} sm_{sm}{suffix} in the part read ({shown}); the GPU code of "
            f"{', '.join(partial[:3])} lies past the bytes read",
        )
    return _check(
        claim, "false", f"no {what} sm_{sm}{suffix} in any object or cubin: the wheel has {shown}"
    )


def audit_cuda(feature: str, value: str, majors: dict[int, list[str]]) -> ClaimCheck:
    """`majors`: CUDA major -> the sonames (with their importer) that name it."""
    claim = f"nvidia :: {feature} :: {value}"
    try:
        bound = Version(value)
    except InvalidVersion:
        return _check(claim, "not-audited", f"{value!r}: no version")
    if not majors:
        return _check(
            claim,
            "not-audited",
            "its objects link no libcudart/libcublas/libnvrtc (a static runtime or no "
            "CUDA code): no CUDA version to compare",
        )
    seen = "; ".join(f"{m}: {', '.join(names[:2])}" for m, names in sorted(majors.items()))
    if feature == "cuda_version_lower_bound":
        bad = [m for m in majors if m < bound.major]
        rule = f">= {value}"
    else:
        # the upper bound is exclusive: "13" means CUDA < 13, "12.9" CUDA < 12.9
        bad = [m for m in majors if m > bound.major or (m == bound.major and bound.minor == 0)]
        rule = f"< {value}"
    if bad:
        return _check(
            claim, "false", f"claims CUDA {rule}, its objects need CUDA {bad[0]} ({seen})"
        )
    return _check(claim, "holds", f"CUDA majors needed: {seen} (a soname names the major only)")


@dataclass(frozen=True)
class AuditInputs:
    package: str
    versions: list[Version] | None  # None: every version with a labelled wheel
    index: str
    torch_index: str
    python: tuple[int, int]
    cache: FactsCache
    interpreter: Path | None
    offline: bool = False
    jobs: int = 6


def _binary_facts(scan: WheelScan) -> tuple[list[GpuCode], list[str], dict[int, list[str]]]:
    codes: list[GpuCode] = []
    partial: list[str] = []
    majors: dict[int, list[str]] = {}
    for member, facts in sorted(scan.facts.items()):
        codes.extend(facts.codes())
        if facts.read is not None and facts.read.gpu_code == "partial":
            partial.append(member)
        for soname in facts.needed:
            match = _CUDA_MAJOR.match(soname)
            if match:
                majors.setdefault(int(match.group(1)), []).append(
                    f"{Path(member).name} needs {soname}"
                )
    labels = [label for label in scan.cubin_codes.values() if label]
    codes.extend(CachedFacts(gpu_codes=labels).codes())
    return codes, partial, majors


def _read_member(remote: RemoteWheel, suffix: str) -> bytes | None:
    if not remote.members:
        remote.read_directory()
    names = sorted(
        n for n in remote.members if n.count("/") == 1 and n.split("/")[0].endswith(".dist-info")
    )
    name = next((n for n in names if n.endswith("/" + suffix)), None)
    if name is None:
        return None
    member = remote.members[name]
    if member.size > MAX_VARIANT_JSON:
        raise ZipFormatError(f"{name}: {member.size} bytes, more than {MAX_VARIANT_JSON}")
    view = remote.view(member, None)
    view.ensure(0, member.size)
    return view.get(0, member.size)


def _torch_for(value: str, torches: list[Version]) -> Version | None:
    """The newest release of the series an `abi_dependency :: torch :: X[.Y[.Z]]` names."""
    parts = value.split(".")
    if not all(p.isdigit() for p in parts) or not 1 <= len(parts) <= 3:
        return None
    want = tuple(int(p) for p in parts)
    hits = [t for t in torches if not t.is_prerelease and t.release[: len(want)] == want]
    return max(hits) if hits else None


class _Auditor:
    """One audit run: a client, the facts of every labelled wheel, torch closures by version."""

    def __init__(self, inputs: AuditInputs, client: httpx.Client) -> None:
        self.inputs = inputs
        self.client = client
        self._torches: list[Version] | None = None
        self._closures: dict[str, LockWheels | ClosureError] = {}

    def torches(self) -> list[Version]:
        if self._torches is None:
            files = project_files(self.client, self.inputs.torch_index, "torch")
            self._torches = sorted({f.version for f in files if not f.yanked})
        return self._torches

    def closure(self, torch: str) -> LockWheels | ClosureError:
        if torch not in self._closures:
            try:
                self._closures[torch] = torch_closure(
                    self.inputs.cache,
                    torch,
                    self.inputs.python,
                    torch_index=self.inputs.torch_index,
                    index=self.inputs.index,
                    offline=self.inputs.offline,
                )
            except ClosureError as exc:
                self._closures[torch] = exc
        return self._closures[torch]

    def audit_abi(self, feature: str, value: str, wheel: LockedWheel) -> ClaimCheck:
        claim = f"{VARIANT_ABI_DEPENDENCY_NAMESPACE} :: {feature} :: {value}"
        if canonicalize_name(feature) != "torch":
            return _check(claim, "not-audited", "only torch's ABI is checked")
        try:
            torch = _torch_for(value, self.torches())
        except IndexError_ as exc:
            return _check(claim, "not-audited", str(exc))
        if torch is None:
            return _check(
                claim, "not-audited", f"no torch release {value}(.*) on {self.inputs.torch_index}"
            )
        closure = self.closure(str(torch))
        if isinstance(closure, ClosureError):
            return _check(claim, "not-audited", str(closure))
        pair = decide(
            PairInputs(
                package=canonicalize_name(self.inputs.package),
                version=wheel.version,
                torch=str(torch),
                wheel=wheel,
                closure=closure,
                cache=self.inputs.cache,
                interpreter=self.inputs.interpreter,
                offline=self.inputs.offline,
                jobs=self.inputs.jobs,
            )
        )
        if pair.verdict == "loads":
            return _check(claim, "holds", f"loads beside torch {torch}: {pair.reason[:200]}")
        if pair.verdict == "breaks":
            return _check(
                claim, "false", f"cannot load beside torch {torch}: {pair.kind}: {pair.first[:300]}"
            )
        return _check(
            claim, "not-audited", f"beside torch {torch} undecidable: {pair.reason[:300]}"
        )


def _locked(client: httpx.Client, package: str, row: IndexRow, version: Version) -> LockedWheel:
    size = row.size
    if size is None:
        try:
            size = int(client.head(row.url).headers["content-length"])
        except (httpx.HTTPError, KeyError, ValueError) as exc:
            raise IndexError_(f"{row.url}: size unknown ({exc})") from None
    return LockedWheel(
        canonicalize_name(package), str(version), row.url, row.sha256 or "", size, row.filename
    )


def _linux_x86_64(filename: str) -> bool:
    match = VALIDATION_WHEEL_NAME_REGEX.fullmatch(filename)
    plat = str(match.group("plat")) if match else ""
    return any(
        p.endswith("_x86_64") and p.startswith(("manylinux", "linux")) for p in plat.split(".")
    )


def _index_variants(
    client: httpx.Client, rows: list[IndexRow], version: str
) -> tuple[str, dict[str, list[str]] | str] | None:
    """The index's variants.json for this version: (file name, label -> properties), or
    (file name, why it could not be read); None when the index has none."""
    row = next(
        (
            r
            for r in rows
            if r.filename.endswith("-variants.json") and _json_version(r.filename) == version
        ),
        None,
    )
    if row is None:
        return None
    try:
        answer = client.get(row.url)
        if answer.status_code != 200:
            return row.filename, f"HTTP {answer.status_code}"
        if len(answer.content) > MAX_VARIANT_JSON:
            return row.filename, f"more than {MAX_VARIANT_JSON} bytes"
        return row.filename, parse_index_variants(answer.content)
    except httpx.HTTPError as exc:
        return row.filename, f"{type(exc).__name__}: {exc}"
    except VariantFileError as exc:
        return row.filename, str(exc)


def _json_version(filename: str) -> str:
    stem = filename[: -len("-variants.json")]
    _name, _, version = stem.rpartition("-")
    try:
        return str(Version(version))
    except InvalidVersion:
        return version


def _index_claim(
    label: str, props: list[str], found: tuple[str, dict[str, list[str]] | str] | None
) -> list[ClaimCheck]:
    if found is None:
        return []
    name, table = found
    if isinstance(table, str):
        return [_check(name, "false", f"not readable: {table}")]
    listed = table.get(label)
    if listed is None:
        return [
            _check(
                name,
                "false",
                f"label {label} is not among its variants ({', '.join(sorted(table))})",
            )
        ]
    if listed != props:
        only_index = sorted(set(listed) - set(props))
        only_wheel = sorted(set(props) - set(listed))
        return [
            _check(
                name,
                "false",
                f"label {label}: the index says {only_index or 'nothing more'}, the "
                f"wheel's {VARIANT_DIST_INFO_FILENAME} {only_wheel or 'nothing more'}",
            )
        ]
    return [_check(name, "holds", f"label {label}: same properties")]


def audit(inputs: AuditInputs) -> VariantReport:
    """Every labelled Linux x86_64 wheel of the chosen versions, each claim audited."""
    with make_client() as client:
        rows = project_rows(client, inputs.index, inputs.package)
        wheels = [r for r in rows if r.filename.endswith(".whl")]
        labelled = [r for r in wheels if variant_label(r.filename) and r.sha256]
        chosen: list[tuple[IndexRow, LockedWheel]] = []
        not_audited: list[str] = []
        for row in labelled:
            version = wheel_version(row.filename)
            if version is None or (inputs.versions is not None and version not in inputs.versions):
                continue
            if not _linux_x86_64(row.filename):
                not_audited.append(row.filename)
                continue
            chosen.append((row, _locked(client, inputs.package, row, version)))
        scanner = Scanner(
            inputs.cache,
            offline=inputs.offline,
            virtual_site=Path("/stackgate-compat/variants"),
            jobs=inputs.jobs,
        )
        try:
            report = scanner.scan([w for _, w in chosen])
        finally:
            scanner.close()
        auditor = _Auditor(inputs, client)
        audits = [
            _audit_one(auditor, row, wheel, scan, rows, client)
            for (row, wheel), scan in zip(chosen, report.wheels, strict=True)
        ]
    return VariantReport(
        package=str(canonicalize_name(inputs.package)),
        index=inputs.index,
        files=len(rows),
        wheels=len(wheels),
        labelled_wheels=len(labelled),
        variants_json=sorted(r.filename for r in rows if r.filename.endswith("-variants.json")),
        audits=audits,
        not_audited=not_audited,
    )


def _audit_one(
    auditor: _Auditor,
    row: IndexRow,
    wheel: LockedWheel,
    scan: WheelScan,
    rows: list[IndexRow],
    client: httpx.Client,
) -> WheelAudit:
    label = variant_label(row.filename) or ""
    base: dict[str, Any] = {"wheel": row.filename, "version": wheel.version, "label": label}
    if scan.errors or scan.malformed or scan.integrity:
        why = (scan.errors + scan.malformed + scan.integrity)[0]
        return WheelAudit(**base, properties=[], claims=[], error=f"not readable: {why}")
    with _spool() as spool:
        remote = RemoteWheel(RemoteFile(client, wheel.url, wheel.size, Path(spool)), wheel.sha256)
        try:
            data = _read_member(remote, VARIANT_DIST_INFO_FILENAME)
        except (FetchError, ZipFormatError) as exc:
            return WheelAudit(**base, properties=[], claims=[], error=str(exc))
        fetched = remote.remote.stats.bytes_fetched
        remote.remote.close()
    base["bytes_fetched"] = scan.bytes_fetched + fetched
    if data is None:
        return WheelAudit(
            **base,
            properties=[],
            claims=[],
            error=f"its name has variant label {label} but it holds no "
            f"*.dist-info/{VARIANT_DIST_INFO_FILENAME}",
        )
    try:
        props = parse_dist_info(data, label)
    except VariantFileError as exc:
        return WheelAudit(**base, properties=[], claims=[], error=str(exc))
    codes, partial, majors = _binary_facts(scan)
    claims: list[ClaimCheck] = []
    for prop in props:
        namespace, feature, value = _split(prop)
        if namespace == "nvidia" and feature == "sm_arch":
            claims.append(audit_arch(value, codes, partial))
        elif namespace == "nvidia" and feature in (
            "cuda_version_lower_bound",
            "cuda_version_upper_bound",
        ):
            claims.append(audit_cuda(feature, value, majors))
        elif namespace == VARIANT_ABI_DEPENDENCY_NAMESPACE:
            claims.append(auditor.audit_abi(feature, value, wheel))
        else:
            claims.append(
                _check(prop, "not-audited", "a property this reader has no binary evidence for")
            )
    claims += _index_claim(label, props, _index_variants(client, rows, wheel.version))
    return WheelAudit(**base, properties=props, claims=claims)


def _spool() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="stackgate-variants-")
