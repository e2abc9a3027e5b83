"""A stack's own gate policy (`[validation.gate]` in its manifest) under the command line's flags.

The defaults (8 runs, 0.5% margin, 1% family false alarms) are sized for a dedicated host at
~1% noise; a stack served on a shared machine can declare its own margins and repeats, and
`interleave = true` so that only a gate re-measuring its baseline beside the candidate counts
(a shared host's level drifts between phases: benchmarks/gate_h200/results/README.md).
Precedence: a flag given on the command line, else the baseline stack's manifest, else the
defaults in validators/gate/policy.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import ValidationError

from stackgate.errors import BadInput
from stackgate.manifest import GateSettings
from stackgate.manifest.loading import LoadedStack, load_stack
from stackgate.paths import display_path, stack_names
from validators.gate.policy import (
    DEFAULT_CONFIDENCE,
    DEFAULT_REPEATS,
    DEFAULT_TAIL_TOLERANCE,
    DEFAULT_TOLERANCE,
    GatePolicy,
)
from validators.records.model import Record


@dataclass(frozen=True)
class StackGate:
    """The gate settings of one stack and the manifest they came from (None: defaults)."""

    stack: str | None = None
    source: str | None = None
    settings: GateSettings = field(default_factory=GateSettings)


def stack_gate(stack: str | None, load: Callable[[str], LoadedStack] = load_stack) -> StackGate:
    """The settings of STACK's manifest in the stacks folder; a stack that is not there (a
    record of a stack since removed) gets the defaults. A bad [validation.gate] is exit 2
    naming the file and field (load_stack; `load`: a command's Lookup, read once)."""
    if stack is None or stack not in stack_names():
        return StackGate(stack)
    loaded = load(stack)
    return StackGate(stack, display_path(loaded.path), loaded.manifest.validation.gate)


T = TypeVar("T", int, float)


def _pick(flag: T | None, declared: T | None, default: T) -> T:
    if flag is not None:
        return flag
    return declared if declared is not None else default


@dataclass(frozen=True)
class GateFlags:
    """The command line's say in the gate policy (None: not given)."""

    tolerance: float | None = None
    tail_tolerance: float | None = None
    confidence: float | None = None
    min_repeats: int | None = None
    repeats: int | None = None  # runs (or ABBA pairs) to make, where the command makes them


@dataclass(frozen=True)
class GateDecision:
    """What a gate against a stack applies, decided once: the policy and the runs to make."""

    policy: GatePolicy
    runs: int


def decide(flags: GateFlags, settings: GateSettings | None = None) -> GateDecision:
    """The policy (flags over the stack's [validation.gate] over the defaults; exit 2 when bad)
    and how many runs a side gets: --repeats, else the stack's `repeats`, else the default.
    `gate` makes that many runs per side and `mark-good` makes that many for the baseline, so a
    stack declaring `repeats = 12` gets a 12-run record its own gate accepts."""
    declared = settings or GateSettings()
    try:
        policy = GatePolicy(
            tolerance=_pick(flags.tolerance, declared.tolerance, DEFAULT_TOLERANCE),
            tail_tolerance=_pick(
                flags.tail_tolerance, declared.tail_tolerance, DEFAULT_TAIL_TOLERANCE
            ),
            confidence=_pick(flags.confidence, None, DEFAULT_CONFIDENCE),
            min_repeats=_pick(flags.min_repeats, declared.repeats, DEFAULT_REPEATS),
        )
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    return GateDecision(policy, _pick(flags.repeats, declared.repeats, DEFAULT_REPEATS))


def proven_settings(baseline: Record, declared: GateSettings | None = None) -> GateSettings:
    """The [validation.gate] of the manifest the baseline was proven under (its sealed copy); the
    defaults when it had none.

    A record's policy travels with it: one holding fewer runs than the default minimum was not made
    under it. Without a stated `repeats`, the minimum is what its stack declares now (`declared`) if
    the record holds that many runs, else the record's own count; a record of the default count or
    more keeps the default (the tree cannot lower it).
    """
    validation = baseline.manifest.get("validation")
    table = validation.get("gate") if isinstance(validation, dict) else None
    try:
        proven = GateSettings.model_validate(table) if isinstance(table, dict) else GateSettings()
    except ValidationError:
        proven = GateSettings()
    if proven.repeats is None and 2 <= baseline.runs < DEFAULT_REPEATS:
        wanted = declared.repeats if declared is not None else None
        runs = wanted if wanted is not None and wanted <= baseline.runs else baseline.runs
        proven = proven.model_copy(update={"repeats": runs})
    return proven


def stricter(a: GatePolicy, b: GatePolicy) -> GatePolicy:
    """Per field, the policy that refuses more: smaller margins, more runs, more confidence."""
    return GatePolicy(
        tolerance=min(a.tolerance, b.tolerance),
        tail_tolerance=min(a.tail_tolerance, b.tail_tolerance),
        confidence=max(a.confidence, b.confidence),
        min_repeats=max(a.min_repeats, b.min_repeats),
        resamples=max(a.resamples, b.resamples),
        overrides=a.overrides,
    )


def under_baseline(
    flags: GateFlags,
    policy: GatePolicy,
    baseline: Record,
    interleaving: bool,
    declared: GateSettings | None = None,
) -> tuple[GatePolicy, list[str]]:
    """The working tree's manifest may tighten its stack's gate, never loosen it below what the
    baseline record was proven under: the manifest is edited by the very change being gated
    (`tolerance = 0.9` beside a torch bump passed a 50%-slower candidate). Returns the policy
    to apply and what the tree tried to loosen; a looser policy needs a new known-good record
    (mark-good copies the manifest it was proven under)."""
    proven = proven_settings(baseline, declared)
    require_interleave(
        StackGate(baseline.stack, f"{baseline.label}'s manifest", proven), interleaving
    )
    theirs = decide(flags, proven).policy
    applied = stricter(policy, theirs)
    loosened = [
        f"{name} {getattr(policy, name)} (baseline {baseline.short_id}: {getattr(theirs, name)})"
        for name in ("tolerance", "tail_tolerance", "confidence", "min_repeats")
        if getattr(applied, name) != getattr(policy, name)
    ]
    return applied, loosened


def require_interleave(gate: StackGate, interleaving: bool) -> None:
    """`interleave = true`: a gate on the record's numbers alone is refused before any run."""
    if gate.settings.interleave and not interleaving:
        raise BadInput(
            f"{gate.source}: [validation.gate] interleave = true: a gate against "
            f"{gate.stack} must re-measure the baseline beside the candidate; add "
            "--interleave-with BASELINE_ENV (the record's env; `validators reproduce` rebuilds it)"
        )
