"""Whether a run answered its question: a check that decides a group (stackgate.validator_groups
`deciding`: the driver and GPU checks, runtime.gpu, serve-bench.launch) that was SKIPped, or a
group whose every result is a SKIP, leaves the verdict INCOMPLETE and the exit code 3 (the host
lacks what the question needs), never OK: "OK ... 8 skipped" on a host without a GPU read as
"validated" to a CI job keyed on the exit code."""

from __future__ import annotations

from collections.abc import Sequence

from stackgate.validator_groups import GROUPS
from validators.core.results import Result

DECIDING = frozenset(check for group in GROUPS for check in group.deciding)


def _group_of(check: str) -> str:
    return next((g.name for g in GROUPS if check.startswith(f"{g.name}.")), "")


def undecided(results: Sequence[Result]) -> str | None:
    """Why what decides the verdict was not checked (one clause per check), None when it was.
    A SKIP the stack accepts (validation.accepted_findings) was decided by its author."""
    skipped = [
        r
        for r in results
        if r.status == "SKIP" and r.check in DECIDING and "accepted" not in r.evidence
    ]
    seen = {_group_of(r.check) for r in skipped}
    groups: dict[str, list[Result]] = {}
    for r in results:
        groups.setdefault(_group_of(r.check), []).append(r)
    for name, rows in groups.items():
        if name and name not in seen and rows and all(r.status == "SKIP" for r in rows):
            skipped.append(rows[0])
    if not skipped:
        return None
    return "not decided: " + "; ".join(f"{r.check} skipped ({r.reason})" for r in skipped)
