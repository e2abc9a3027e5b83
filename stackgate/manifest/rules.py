"""Compatibility rules as data (stacks/rules.toml), evaluated with packaging specifiers.

A rule fires when every condition in its `when` table holds. Stack rules need only the
manifest (and, where a lock exists, its resolved versions): `builder check` runs them before
anything is downloaded. Host rules (`host_*` conditions) also need facts about the machine:
the validators' preflight evaluates them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version
from pydantic import Field, ValidationError

from stackgate.errors import ManifestError, Problem
from stackgate.manifest import Manifest, Strict
from stackgate.manifest.loading import format_validation_errors, read_toml
from stackgate.manifest.values import SpecifierStr, arch_cc
from stackgate.paths import checkout_root, display_path, stacks_dir
from stackgate.settings import value

# stacks/rules.toml as the wheel carries it (for an installed stackgate outside a checkout).
PACKAGED_RULES = Path(__file__).resolve().parents[1] / "shipped" / "rules.toml"

Severity = Literal["error", "warning"]


class When(Strict):
    """Conditions; all given must hold. Package names are matched canonically."""

    packages: dict[str, SpecifierStr] = Field(default_factory=dict)
    packages_not: dict[str, SpecifierStr] = Field(
        default_factory=dict, description="Pinned, and its version outside the specifier."
    )
    cuda: SpecifierStr | None = None
    archs: SpecifierStr | None = Field(
        default=None, description="Some target arch's compute capability (major.minor) in it."
    )
    arch_suffix_exact: bool | None = Field(
        default=None, description="Some target arch is an 'a' (exact-CC) target."
    )
    min_driver: SpecifierStr | None = None
    min_nvcc_for_jit: SpecifierStr | None = None
    cuda_major_differs: list[str] = Field(default_factory=list, max_length=2)
    serving_flag: str | None = None
    serving_attention_backend: list[str] = Field(default_factory=list)
    host_driver: SpecifierStr | None = None
    host_nvcc: SpecifierStr | None = None
    host_cc: SpecifierStr | None = None


class Rule(Strict):
    id: str
    severity: Severity
    message: str = Field(description="Names both sides; {package} and {cuda} are filled in.")
    evidence: str
    remedy: str | None = None
    when: When

    @property
    def needs_host(self) -> bool:
        w = self.when
        return any(x is not None for x in (w.host_driver, w.host_nvcc, w.host_cc))


class RuleFile(Strict):
    schema_version: Literal[1]
    rules: list[Rule]


@dataclass(frozen=True)
class HostRuleFacts:
    """What a probe learned about the machine; None where it could not tell."""

    driver: Version | None = None
    nvcc: Version | None = None
    gpu_ccs: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class StackFacts:
    packages: Mapping[str, Version]
    cuda_majors: Mapping[str, int]
    cuda: Version
    archs: tuple[str, ...]
    min_driver: Version
    min_nvcc_for_jit: Version | None
    serving_flags: frozenset[str]
    attention_backends: frozenset[str]
    host: HostRuleFacts | None = None
    extra: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_manifest(
        cls,
        manifest: Manifest,
        *,
        locked: Mapping[str, str] | None = None,
        host: HostRuleFacts | None = None,
    ) -> StackFacts:
        """Pins from the manifest; versions a lock resolved fill in what the manifest leaves open."""
        packages: dict[str, Version] = {}
        majors: dict[str, int] = {}
        for name, version in (locked or {}).items():
            packages[canonicalize_name(name)] = Version(version)
        for name, pin in manifest.packages.items():
            key = canonicalize_name(name)
            if pin.version is not None:
                packages[key] = Version(pin.version)
            elif pin.ref is not None and re.fullmatch(r"v?\d+(\.\d+)+", pin.ref):
                packages[key] = Version(pin.ref.lstrip("v"))
            if pin.cuda_major is not None:
                majors[key] = pin.cuda_major
        flags: set[str] = set()
        backends: set[str] = set()
        for profile in manifest.serving.values():
            flags.update(a.split("=", 1)[0] for a in profile.extra_args if a.startswith("--"))
            if profile.attention_backend:
                backends.add(profile.attention_backend)
        return cls(
            packages=packages,
            cuda_majors=majors,
            cuda=Version(manifest.host.cuda),
            archs=tuple(manifest.host.target_archs),
            min_driver=Version(manifest.host.min_driver),
            min_nvcc_for_jit=(
                Version(manifest.host.min_nvcc_for_jit) if manifest.host.min_nvcc_for_jit else None
            ),
            serving_flags=frozenset(flags),
            attention_backends=frozenset(backends),
            host=host,
        )


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: Severity
    message: str
    evidence: str
    remedy: str | None

    def as_dict(self) -> dict[str, str | None]:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "message": self.message,
            "evidence": self.evidence,
            "remedy": self.remedy,
        }


def default_rules_path() -> Path:
    """The stacks folder's rules.toml; a stacks folder of one's own (STACKGATE_STACKS_DIR: a
    test's, a reproduce's) without one gets the checkout's. The rules are facts about packages
    and hosts, not about one folder of manifests: a folder without a rules file must not mean
    "no rules" (nor a crash of the host group). Outside any
    checkout, the copy the wheel carries (pyproject's force-include)."""
    checkout = checkout_root()
    if checkout is None and not value("STACKGATE_STACKS_DIR"):
        return PACKAGED_RULES  # an installed stackgate, run outside a checkout
    own = stacks_dir() / "rules.toml"
    if own.is_file():
        return own
    shipped = checkout / "stacks" / "rules.toml" if checkout is not None else PACKAGED_RULES
    return shipped if shipped.is_file() else own


def load_rules(path: Path | None = None) -> list[Rule]:
    file = path or default_rules_path()
    shown = display_path(file)
    raw = read_toml(file, shown)
    try:
        parsed = RuleFile.model_validate(raw)
    except ValidationError as exc:
        raise ManifestError(Problem(shown, *p) for p in format_validation_errors(exc)) from None
    ids = [r.id for r in parsed.rules]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ManifestError([Problem(shown, "rules", f"duplicate ids: {', '.join(dupes)}")])
    return parsed.rules


def _cc(arch: str) -> Version:
    major, minor, _ = arch_cc(arch)
    return Version(f"{major}.{minor}")


def _holds(when: When, facts: StackFacts) -> bool:
    """True when every condition given holds (a host condition without host facts: False)."""
    checks: list[bool] = []
    for name, spec in when.packages.items():
        have = facts.packages.get(canonicalize_name(name))
        checks.append(have is not None and SpecifierSet(spec).contains(have, prereleases=True))
    for name, spec in when.packages_not.items():
        have = facts.packages.get(canonicalize_name(name))
        checks.append(have is not None and not SpecifierSet(spec).contains(have, prereleases=True))
    if when.cuda is not None:
        checks.append(facts.cuda in SpecifierSet(when.cuda))
    if when.archs is not None:
        arch_spec = SpecifierSet(when.archs)
        checks.append(any(_cc(a) in arch_spec for a in facts.archs))
    if when.arch_suffix_exact is not None:
        checks.append(any(a.endswith("a") for a in facts.archs) == when.arch_suffix_exact)
    if when.min_driver is not None:
        checks.append(facts.min_driver in SpecifierSet(when.min_driver))
    if when.min_nvcc_for_jit is not None:
        have_nvcc = facts.min_nvcc_for_jit
        checks.append(have_nvcc is not None and have_nvcc in SpecifierSet(when.min_nvcc_for_jit))
    if when.cuda_major_differs:
        a, b = (canonicalize_name(n) for n in when.cuda_major_differs)
        ma, mb = facts.cuda_majors.get(a), facts.cuda_majors.get(b)
        checks.append(ma is not None and mb is not None and ma != mb)
    if when.serving_flag is not None:
        checks.append(when.serving_flag in facts.serving_flags)
    if when.serving_attention_backend:
        checks.append(bool(facts.attention_backends & set(when.serving_attention_backend)))
    checks.extend(_host_holds(when, facts.host))
    return bool(checks) and all(checks)


def _host_holds(when: When, host: HostRuleFacts | None) -> Iterator[bool]:
    if when.host_driver is not None:
        yield (
            host is not None
            and host.driver is not None
            and host.driver in SpecifierSet(when.host_driver)
        )
    if when.host_nvcc is not None:
        yield (
            host is not None and host.nvcc is not None and host.nvcc in SpecifierSet(when.host_nvcc)
        )
    if when.host_cc is not None:
        spec = SpecifierSet(when.host_cc)
        yield host is not None and any(Version(f"{a}.{b}") in spec for a, b in host.gpu_ccs)


_PLACEHOLDER = re.compile(r"\{([A-Za-z0-9._-]+)\}")


def _render(template: str, facts: StackFacts, when: When) -> str:
    values: dict[str, str] = {name: str(v) for name, v in facts.packages.items()}
    values.update({f"{name}-cuda-major": str(m) for name, m in facts.cuda_majors.items()})
    values["cuda"] = str(facts.cuda)
    archs = facts.archs
    if when.archs is not None:
        archs = tuple(a for a in archs if _cc(a) in SpecifierSet(when.archs))
    values["archs"] = ", ".join(archs)
    values["min_driver"] = str(facts.min_driver)
    if facts.host is not None:
        values["host_driver"] = str(facts.host.driver)
        values["host_nvcc"] = str(facts.host.nvcc)
    return _PLACEHOLDER.sub(
        lambda m: values.get(canonicalize_name(m.group(1)), values.get(m.group(1), m.group(0))),
        template,
    )


def evaluate(
    rules: list[Rule], facts: StackFacts, *, scope: Literal["stack", "host", "all"] = "stack"
) -> list[Finding]:
    """Findings of the rules in `scope` that fire on `facts`, errors first."""
    findings: list[Finding] = []
    for rule in rules:
        if scope == "stack" and rule.needs_host:
            continue
        if scope == "host" and not rule.needs_host:
            continue
        if _holds(rule.when, facts):
            findings.append(
                Finding(
                    rule=rule.id,
                    severity=rule.severity,
                    message=_render(rule.message, facts, rule.when),
                    evidence=rule.evidence,
                    remedy=rule.remedy,
                )
            )
    return sorted(findings, key=lambda f: f.severity != "error")
