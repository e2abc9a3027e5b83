"""`--bad GATE.json`: the `--json` output of the gate that refused the candidate.

It names the candidate (its stack) and is the whole candidate's first verdict: the bisect does
not spend a gate on it again. Read with the gate's own model (GateResult); refused when it is
not a gate's output, when the gate passed, when it was against another baseline, or when the
candidate's lock has moved since (a version the gate saw is not the locked one)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from stackgate.errors import BadInput, CheckFailed
from stackgate.files import parse_json_text, read_text_bounded
from stackgate.lock.uvlock import UvLock
from stackgate.model import parsed
from validators.bisect.units import canonical, lock_versions
from validators.gate.compare import GateResult


@dataclass(frozen=True)
class Refusal:
    path: Path
    result: GateResult

    @property
    def stack(self) -> str:
        """The candidate's stack: the gate names it as its record's label, `stack@id`."""
        return self.result.candidate.rsplit("@", 1)[0]


def is_gate_output(bad: str) -> bool:
    return bad.endswith(".json")


def read_refusal(path: Path) -> Refusal:
    if not path.is_file():
        raise BadInput(f"--bad {path}: no such file (a refused gate's --json output)")
    # parse_json_text: bounded depth (a 5,000-deep file is bad input, never a RecursionError
    # traceback), duplicate keys refused
    data = parse_json_text(read_text_bounded(path), where=str(path))
    if not isinstance(data, dict):
        raise BadInput(f"{path}: not a gate's --json output (an object with the gate's fields)")
    ok = data.pop("ok", None)
    result = parsed(GateResult, data, f"{path}: not a gate's --json output", limit=12)
    if ok is not None and ok is not result.passed:
        raise BadInput(f"{path}: ok: {ok} but passed: {result.passed}")
    if result.passed:
        raise CheckFailed(
            f"{path}: passed: true: the gate did not refuse {result.candidate}; nothing to bisect"
        )
    return Refusal(path, result)


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def check_refusal(refusal: Refusal, baseline_label: str, cand_lock: UvLock, lockfile: Path) -> None:
    """The refusal must be of this baseline and of the candidate as it is locked now."""
    result = refusal.result
    if result.baseline != baseline_label:
        raise BadInput(
            f"{refusal.path}: baseline: the gate compared with {result.baseline}, --good is "
            f"{baseline_label}"
        )
    locked = lock_versions(cand_lock)
    moved = [
        f"{change.key} {change.b} (locked now: {locked[canonical(change.key)]})"
        for change in result.versions
        if change.b is not None
        and canonical(change.key) in locked
        and not _same_version(locked[canonical(change.key)], change.b)
    ]
    if moved:
        raise BadInput(
            f"{refusal.path}: versions: the gate measured another candidate than {lockfile} "
            "locks now (gate it again)",
            details=moved[:12],
        )
