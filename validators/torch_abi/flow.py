"""`compat` past its arguments: the matrix of a package's versions beside torch's, judged against
the rules, or the variant claims its wheels publish, audited against their binaries.

The command module (validators/commands/compat.py) parses the arguments and prints; it imports
this module only where a matrix or an audit runs, since httpx, the static check and jinja2 come
with it (`compat --lock`, which `builder lock` starts, needs none of them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from packaging.version import Version

from stackgate.errors import BadInput, EnvironmentProblem
from stackgate.lock.torch_abi import PairVerdict
from stackgate.manifest.rules import Rule
from validators.elf.facts_cache import FactsCache
from validators.lockcheck.check import find_interpreter
from validators.lockcheck.http_ranges import make_client
from validators.torch_abi.index import IndexError_, project_rows
from validators.torch_abi.matrix import Matrix, Request, compute
from validators.torch_abi.proposals import Proposal, RuleCheck, check_rules, propose, uncovered
from validators.torch_abi.variants import AuditInputs, VariantReport, audit, wheel_version

VERDICTS = ("loads", "breaks", "undecidable")


@contextmanager
def _reading_index(package: str) -> Iterator[None]:
    """A package the index does not list is bad input (exit 2); an index that cannot be read
    is an environment problem (exit 3)."""
    try:
        yield
    except IndexError_ as exc:
        if "HTTP 404" in str(exc):
            raise BadInput(f"{package}: not on the index ({exc})") from None
        raise EnvironmentProblem(f"index unreadable: {exc}") from None


def compute_matrix(
    request: Request, cache: FactsCache, progress: Callable[[PairVerdict], None]
) -> Matrix:
    with _reading_index(request.package):
        return compute(request, cache, find_interpreter(request.python), progress)


@dataclass(frozen=True)
class Judged:
    """A matrix against the rules: the rules it proposes, how each hand-written rule fares, and
    the breaking pairs no rule covers."""

    matrix: Matrix
    proposals: list[Proposal]
    checks: list[RuleCheck]
    loose: list[PairVerdict]

    def counts(self) -> dict[str, int]:
        return {k: sum(p.verdict == k for p in self.matrix.pairs) for k in VERDICTS}


def judge(matrix: Matrix, rules: list[Rule]) -> Judged:
    return Judged(matrix, propose(matrix), check_rules(matrix, rules), uncovered(matrix, rules))


def audit_variants(request: Request, cache: FactsCache, *, chosen: bool) -> VariantReport:
    """The variant claims of every version of the package, or (`chosen`: --versions given) of
    the versions on the index that the request's specifiers select."""
    versions = None
    if chosen:
        versions = [
            Version(v)
            for v in _index_versions(request)
            if any(s.contains(v, prereleases=True) for s in request.versions)
        ]
    inputs = AuditInputs(
        package=request.package,
        versions=versions,
        index=request.index,
        torch_index=request.torch_index,
        python=request.python,
        cache=cache,
        interpreter=find_interpreter(request.python),
        offline=request.offline,
        jobs=request.jobs,
    )
    with _reading_index(request.package):
        return audit(inputs)


def _index_versions(request: Request) -> list[str]:
    with make_client() as client:
        rows = project_rows(client, request.index, request.package)
    return sorted({str(v) for r in rows if (v := wheel_version(r.filename)) is not None})
