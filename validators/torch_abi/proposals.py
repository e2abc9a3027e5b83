"""Rules from a matrix, in stacks/rules.toml syntax (a person accepts one by copying it), and
the hand-written rules checked against the matrix."""

from __future__ import annotations

import json
from dataclasses import dataclass

from packaging.utils import canonicalize_name
from packaging.version import Version

from stackgate.lock.torch_abi import PairVerdict
from stackgate.manifest.rules import Rule, StackFacts, evaluate
from validators.torch_abi.matrix import Matrix

_COMPARABLE = {"packages", "packages_not", "cuda_major_differs"}


@dataclass(frozen=True)
class Proposal:
    id: str
    package_spec: str
    torch_spec: str
    message: str
    evidence: str
    remedy: str

    def toml(self, package: str) -> str:
        q = json.dumps  # a TOML basic string is a JSON string for this text
        return "\n".join(
            [
                "[[rules]]",
                f"id = {q(self.id)}",
                'severity = "error"',
                f"message = {q(self.message)}",
                f"evidence = {q(self.evidence)}",
                f"remedy = {q(self.remedy)}",
                "[rules.when]",
                f"packages = {{ {package} = {q(self.package_spec)}, torch = {q(self.torch_spec)} }}",
                "",
            ]
        )


def _runs(torches: list[str], bad: set[str]) -> list[list[str]]:
    """Maximal runs of consecutive torch versions (in the matrix's order) that are in `bad`."""
    runs: list[list[str]] = []
    current: list[str] = []
    for t in torches:
        if t in bad:
            current.append(t)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return runs


def _spec(run: list[str]) -> str:
    """Only the torch versions tested: a run at the end of the matrix is not extended to
    untested newer (or older) torch."""
    if len(run) == 1:
        return f"=={run[0]}"
    return f">={run[0]},<={run[-1]}"


def nearest(matrix: Matrix, version: str, torch: str) -> str:
    """What a person stuck on this pair can take instead: the package versions that load with
    this torch (the nearest first) and the torch versions this package version loads with."""
    order = {v: i for i, v in enumerate(matrix.versions)}
    torder = {t: i for i, t in enumerate(matrix.torch_versions)}
    pkgs = sorted(
        (p.version for p in matrix.pairs if p.torch == torch and p.verdict == "loads"),
        key=lambda v: (abs(order[v] - order.get(version, 0)), -order[v]),
    )
    torches = sorted(
        (p.torch for p in matrix.pairs if p.version == version and p.verdict == "loads"),
        key=lambda t: (abs(torder[t] - torder.get(torch, 0)), -torder[t]),
    )
    parts = []
    if torches:
        parts.append(f"{matrix.package} {version} loads with torch {', '.join(torches[:3])}")
    if pkgs:
        parts.append(f"torch {torch} loads with {matrix.package} {', '.join(pkgs[:3])}")
    return "; ".join(parts) or f"no tested {matrix.package} version loads with torch {torch}"


def propose(matrix: Matrix) -> list[Proposal]:
    """One rule per package version and run of consecutive torch versions it breaks with
    (only where it loads with some tested torch: a version that loads with none is a broken
    or foreign build, not a torch pairing, and gets no rule)."""
    out: list[Proposal] = []
    name = matrix.package
    for version in matrix.versions:
        row = [p for p in matrix.pairs if p.version == version]
        loads = [p.torch for p in row if p.verdict == "loads"]
        breaks = {p.torch: p for p in row if p.verdict == "breaks" and p.kind != "no-wheel"}
        if not loads or not breaks:
            continue
        for run in _runs(matrix.torch_versions, set(breaks)):
            first = breaks[run[0]]
            spec = _spec(run)
            tested = ", ".join(run)
            out.append(
                Proposal(
                    id=f"compat-{name}-{version}-torch-{run[0]}"
                    + (f"-{run[-1]}" if len(run) > 1 else ""),
                    package_spec=f"=={version}",
                    torch_spec=spec,
                    message=(
                        f"{name} {{{name}}} cannot load beside torch {{torch}}: {first.first}"
                    ),
                    evidence=(
                        f"validators compat from the wheels' bytes ({first.wheel}): breaks beside "
                        f"torch {tested} ({first.kind}: {first.first}); loads beside torch "
                        f"{', '.join(loads)}"
                    ),
                    remedy=nearest(matrix, version, run[0]),
                )
            )
    return out


@dataclass(frozen=True)
class RuleCheck:
    rule: str
    comparable: bool
    disagreements: list[str]  # pairs the rule forbids that load
    agreements: int  # pairs the rule forbids that break
    note: str = ""


def _facts(matrix: Matrix, p: PairVerdict) -> StackFacts:
    majors: dict[str, int] = {}
    if len(p.cuda_needed) == 1:
        majors[matrix.package] = int(p.cuda_needed[0])
    if len(p.torch_cuda) == 1:
        majors["torch"] = int(p.torch_cuda[0])
    return StackFacts(
        packages={matrix.package: Version(p.version), "torch": Version(p.torch)},
        cuda_majors=majors,
        cuda=Version("0"),
        archs=(),
        min_driver=Version("0"),
        min_nvcc_for_jit=None,
        serving_flags=frozenset(),
        attention_backends=frozenset(),
    )


def check_rules(matrix: Matrix, rules: list[Rule]) -> list[RuleCheck]:
    """Each rule about this package and torch only, evaluated on every pair of the matrix:
    a rule that fires on a pair that loads disagrees with the binaries."""
    out: list[RuleCheck] = []
    for rule in rules:
        when = rule.when
        used = {k for k, v in when.model_dump().items() if v not in (None, [], {})}
        names = {canonicalize_name(n) for n in [*when.packages, *when.packages_not]}
        names |= {canonicalize_name(n) for n in when.cuda_major_differs}
        if matrix.package not in names:
            continue
        if not used <= _COMPARABLE or not names <= {matrix.package, "torch"}:
            out.append(
                RuleCheck(rule.id, False, [], 0, "has conditions beyond this package and torch")
            )
            continue
        bad: list[str] = []
        agree = 0
        for p in matrix.pairs:
            if not evaluate([rule], _facts(matrix, p)):
                continue
            if p.verdict == "loads":
                bad.append(
                    f"{matrix.package} {p.version} + torch {p.torch} loads ({p.reason[:120]})"
                )
            elif p.verdict == "breaks":
                agree += 1
        out.append(RuleCheck(rule.id, True, bad, agree))
    return out


def uncovered(matrix: Matrix, rules: list[Rule]) -> list[PairVerdict]:
    """Pairs that break although no rule fires on them."""
    return [
        p
        for p in matrix.pairs
        if p.verdict == "breaks" and p.kind != "no-wheel" and not evaluate(rules, _facts(matrix, p))
    ]
