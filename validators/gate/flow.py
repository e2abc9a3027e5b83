"""A gate from request to result: the policy decided once, both sides got, then compared.

The command module (validators/commands/gate.py) parses the arguments into a GateRequest,
calls run_gate and prints; everything between lives here. Every manifest, record and file the
steps need comes from one Lookup (validators/records/reference.py), so each is read once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from stackgate.build_record import build_record_path
from stackgate.cli_hint import cli_command
from stackgate.errors import BadInput, CheckFailed, ManifestError
from stackgate.layout import current_env
from stackgate.manifest import GateSettings
from validators.core.results import Report
from validators.core.runs import run_interleaved, run_validations
from validators.gate.candidate import candidate_record
from validators.gate.compare import GateResult, gate
from validators.gate.policy import DEFAULT_REPEATS
from validators.gate.stack_policy import (
    GateFlags,
    decide,
    require_interleave,
    stack_gate,
    under_baseline,
)
from validators.records.build_facts import read_build_facts
from validators.records.env_verify import recheck_env, require_env_matches
from validators.records.model import Record
from validators.records.reference import Lookup, Reference


@dataclass(frozen=True)
class GateRequest:
    """What `gate` was asked, parsed: paths absolute, references told apart."""

    candidate: Reference
    baseline: Reference | None = None
    runs: tuple[Path, ...] = ()
    env: Path | None = None
    interleave_with: Path | None = None
    keep_runs: Path | None = None
    flags: GateFlags = field(default_factory=GateFlags)


@dataclass(frozen=True)
class GateOutcome:
    result: GateResult
    candidate: Record
    baseline: Record  # the record gated against
    remeasured: Record | None  # its env, run again beside the candidate (--interleave-with)


def run_gate(request: GateRequest, lookup: Lookup, note: Callable[[str], None]) -> GateOutcome:
    """Decide the policy (flags, the baseline stack's [validation.gate], the baseline's sealed
    one), get both sides (running the validators where the candidate is a stack without
    --run), compare. `note` hears what the user should know before a long run starts."""
    declared = stack_gate(baseline_stack(request, lookup), load=lookup.stack)
    interleaving = request.interleave_with is not None
    require_interleave(declared, interleaving)
    decision = decide(request.flags, declared.settings)
    if declared.source is not None and declared.settings != GateSettings():
        note(f"gate policy: {declared.source} [validation.gate] under the flags")
    remeasured: Record | None = None
    if interleaving:
        baseline, remeasured, candidate = _interleaved(request, decision.runs, lookup)
    else:
        candidate, baseline = _both_sides(request, decision.runs, lookup)
    if baseline.kind != "known-good":
        # A baseline named by file or id can be any record; only a proven one is a baseline.
        raise CheckFailed(
            f"baseline {baseline.label} is a {baseline.kind} record, not known-good; refusing "
            f"to gate against it (mark it good first: {cli_command('mark-good STACK --env ENV')})"
        )
    policy, loosened = under_baseline(
        request.flags, decision.policy, baseline, interleaving, declared.settings
    )
    if baseline.runs < DEFAULT_REPEATS and request.flags.min_repeats is None:
        note(
            f"gate policy: {baseline.label} holds {baseline.runs} runs (made below the default "
            f"minimum of {DEFAULT_REPEATS}); minimum applied: {policy.min_repeats} runs a side"
        )
    if loosened:
        note(
            "gate policy: the working tree's [validation.gate] is looser than the one the "
            f"baseline was proven under; the baseline's applies: {'; '.join(loosened)}"
        )
    result = gate(baseline, candidate, policy, remeasured=remeasured)
    return GateOutcome(result, candidate, baseline, remeasured)


def baseline_stack(request: GateRequest, lookup: Lookup) -> str | None:
    """The stack the candidate is gated against, known before any run; None when it cannot be
    told yet (the real error, if any, comes from resolving both sides)."""
    try:
        if request.baseline is not None:
            return lookup.stack_name(request.baseline)
        return lookup.stack_name(request.candidate)
    except ManifestError:
        raise  # a bad manifest is the answer (exit 2 naming file and field), not a fallback
    except BadInput:
        return None


def _baseline_record(request: GateRequest, lookup: Lookup, stack: str) -> Record:
    """--baseline, else the newest known-good record of the candidate's stack."""
    return lookup.any_record(request.baseline) if request.baseline else lookup.record(stack)


def _both_sides(request: GateRequest, runs: int, lookup: Lookup) -> tuple[Record, Record]:
    """Candidate and baseline; when both are missing, one error says so for both."""
    try:
        candidate = candidate_side(request, lookup, runs)
    except BadInput as exc:
        try:
            lookup.any_record(request.baseline or request.candidate)
        except BadInput as missing:
            raise BadInput(
                f"{exc.message}; and the baseline is missing too: {missing.message}",
                details=[*exc.details, *missing.details],
            ) from None
        raise
    return candidate, _baseline_record(request, lookup, candidate.stack)


def candidate_side(request: GateRequest, lookup: Lookup, runs: int) -> Record:
    """The candidate as a record: a record as it is; a run report file (and --run files) made
    into one; a stack's --run files, else `runs` validations of its env."""
    ref = request.candidate
    reports = [lookup.report(p) for p in request.runs]
    if ref.kind == "file":
        found = lookup.file(ref.path)
        if isinstance(found, Record):
            return found
        return candidate_record(None, [found, *reports], env=request.env, load=lookup.stack)
    if ref.is_stack:
        if not reports:
            reports = _validate(ref, request, lookup, runs)
        return candidate_record(ref.text, reports, env=request.env, load=lookup.stack)
    return lookup.record(ref)


def _validate(ref: Reference, request: GateRequest, lookup: Lookup, runs: int) -> list[Report]:
    env = request.env or current_env(lookup.stack(ref).manifest.name)
    if not env.exists():
        raise BadInput(
            f"no runs for candidate {ref}: give --run RESULT.json, or --env PATH to "
            f"validate (default {env} does not exist)"
        )
    if not env.is_dir() or not (env / "bin" / "python").exists():
        # a FIFO or an empty folder went on to 8 validation runs of nothing
        raise BadInput(f"--env {env}: not an environment (no bin/python)")
    return run_validations(ref.text, env, runs, keep_dir=request.keep_runs)


def _interleaved(request: GateRequest, runs: int, lookup: Lookup) -> tuple[Record, Record, Record]:
    """(baseline record, re-measured baseline, candidate) from ABBA runs of the two envs."""
    ref = request.candidate
    if not ref.is_stack or request.runs:
        raise BadInput(
            "--interleave-with needs CANDIDATE as a stack name or manifest (.toml) and no --run "
            "files"
        )
    stack = lookup.stack(ref).manifest.name
    cand_env = request.env or current_env(stack)
    base_env = request.interleave_with
    assert base_env is not None
    baseline = _baseline_record(request, lookup, stack)
    facts = read_build_facts(base_env)
    require_env_matches(base_env, facts)  # unchanged since its own build
    # The record's env, hashed the way the record was (its scheme): a record made before a
    # newer tree-hash scheme names the same files by another hash than today's build record.
    same = recheck_env(base_env, baseline.build)
    if not same.ok:
        raise BadInput(
            f"{base_env} is not the environment of {baseline.label}: env tree "
            f"{same.tree.sha256[:12]} vs recorded {str(baseline.build.env_tree_sha256)[:12]} "
            f"(tree-hash scheme {same.tree.scheme}) (rebuild it: validators reproduce)"
        )
    if build_record_path(cand_env).is_file():
        require_env_matches(cand_env, read_build_facts(cand_env))
    base_reports, cand_reports = run_interleaved(
        (baseline.stack, base_env), (ref.text, cand_env), runs, keep_dir=request.keep_runs
    )
    fresh = candidate_record(baseline.stack, base_reports, env=base_env, load=lookup.stack)
    candidate = candidate_record(ref.text, cand_reports, env=cand_env, load=lookup.stack)
    return baseline, fresh, candidate
