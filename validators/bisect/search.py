"""The searches over change units, as functions of a noisy gate: gate(subset, attempt) is True
when the baseline with that subset of units applied regressed on its `attempt`-th measurement
(1 = first). The baseline alone (the empty subset) is known good. Units are indices 0..n-1.

`bisect()` is the whole search `validators bisect` runs (benchmarks/bisect/bisect_search.py
drives it with a simulated gate):
- `binary`: one culprit, the first unit in order whose prefix regresses, found by a noisy
  bisection (`locate`).
- `interaction`: the same location, then (1) the named unit alone, and if it does not regress
  alone, its partners among the units before it (a regression that needs two or more units
  names all of them), and (2) the candidate without the units named so far: when that still
  regresses, there is another culprit and the search goes on.

Both are deterministic given the answers, so a re-run answering from a cache walks the same path.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

Gate = Callable[[frozenset[int], int], bool]
Mode = Literal["binary", "interaction"]
MODES: tuple[Mode, ...] = ("binary", "interaction")


@dataclass(frozen=True)
class Noise:
    """How often the gate refuses a regressing step (power) and an equal one (false alarm).
    The defaults: the gate's default policy (8 runs, tolerance 1.25%, 95% confidence) on a 3%
    regression at 1% run-to-run noise, over 25 metrics, 40,000 simulated gates
    (benchmarks/gate/results/gate_power.json, `verified`). A test checks they stay in step."""

    power: float = 0.97555
    false_alarm: float = 0.0024970022987352847


SETTLE = 0.5  # past its planned gates, a search goes on while the named one is less likely


@dataclass(frozen=True)
class Budget:
    """How far a location goes past the gates a noiseless bisection needs: `spare` gates more,
    spent only while the named position is below `confidence`.

    A clean path (every verdict consistent) names its position just above 97% at the gate's
    noise: the SAME just below it could be a miss. With a refused gate's JSON the bisect has a
    gate in hand (the whole candidate's), so even a clean path's last SAME is measured again
    (IN_HAND). Without one the spare gate is kept for a doubtful position: a clean path stops."""

    spare: int = 1
    confidence: float = 0.97


IN_HAND = Budget(1, 0.99)  # --bad GATE.json
# "None of them" (the candidate does not regress) contradicts the refusal that started the
# bisect: it is named only this likely (an equal candidate: the whole measured SAME twice).
NOTHING = 0.99


@dataclass
class Evidence:
    """Every verdict seen so far, by subset, in the order measured."""

    gate: Gate
    seen: dict[frozenset[int], list[bool]] = field(default_factory=dict)

    def measure(self, subset: frozenset[int]) -> bool:
        verdicts = self.seen.setdefault(subset, [])
        verdict = self.gate(subset, len(verdicts) + 1)
        verdicts.append(verdict)
        return verdict

    def ask(self, subset: frozenset[int], *, twice: bool = False) -> bool:
        """The subset's verdict: measured when never seen; else regressed when any measurement
        regressed (a false alarm is ten times rarer than a miss at the gate's noise).
        twice: not regressing is only believed from two measurements."""
        if subset not in self.seen:
            self.measure(subset)
        seen = self.seen[subset]
        if twice and seen == [False]:
            self.measure(subset)
        return any(seen)


def _entropy(p: float) -> float:
    return 0.0 if p <= 0.0 or p >= 1.0 else -p * math.log2(p) - (1 - p) * math.log2(1 - p)


def _information(below: float, noise: Noise) -> float:
    """What a gate of a prefix tells about the position (mutual information, bits) when the
    position is below the prefix's end with probability `below`: at this gate's noise a
    prefix that holds only a little of the posterior (a SAME to check again) can tell more
    than the half-and-half split of a noiseless bisection."""
    regress = below * noise.power + (1 - below) * noise.false_alarm
    noise_bits = below * _entropy(noise.power) + (1 - below) * _entropy(noise.false_alarm)
    return _entropy(regress) - noise_bits


@dataclass(frozen=True)
class Located:
    position: int
    confidence: float  # posterior of the position under the noise model


def locate(
    items: Sequence[int],
    fixed: frozenset[int],
    evidence: Evidence,
    noise: Noise = Noise(),
    budget: Budget = Budget(),
    *,
    open_end: bool = False,
) -> Located:
    """The position i of the first item whose prefix regresses: fixed | items[:i+1] regresses,
    fixed | items[:i] does not (fixed alone is known not to). fixed | items is known to
    regress, unless `open_end`: then position m (= len(items)) stands for "none of them" (the
    whole does not regress either), one more hypothesis, and the whole is a prefix like the
    others (measured only when its verdict tells the most; its verdicts seen count).
    Verdicts already seen for these prefixes count from the start, and a prefix measured
    before is measured again when it still tells the most (a SAME that contradicts the later
    verdicts gets a second look). At most ceil(log2 h) + budget.spare gates for h open
    hypotheses: the spare ones only while the named position is below budget.confidence; past
    those only while it is below SETTLE (at most twice as many)."""
    m = len(items)
    h = m + 1 if open_end else m  # hypotheses
    if h == 1:
        return Located(0, 1.0)
    prefixes = [fixed | frozenset(items[:j]) for j in range(m + 1)]
    post = [1.0 / h] * h

    def update(j: int, regressed: bool) -> None:
        # prefix j regresses when the first regressing position i is below j
        for i in range(h):
            if i < j:
                post[i] *= noise.power if regressed else 1.0 - noise.power
            else:
                post[i] *= noise.false_alarm if regressed else 1.0 - noise.false_alarm
        total = sum(post)
        for i in range(h):
            post[i] /= total

    asked = range(1, m + 1) if open_end else range(1, m)
    for j in asked:
        for verdict in evidence.seen.get(prefixes[j], []):
            update(j, verdict)
    # What a noiseless bisection would still need: the hypotheses the verdicts seen so far
    # leave open (a tenth of the likeliest's posterior or more).
    open_ = sum(p >= 0.1 * max(post) for p in post)
    cap = math.ceil(math.log2(open_)) + budget.spare
    limit = 2 * cap + 2
    spent = 0
    while True:
        best = max(range(h), key=lambda i: (post[i], -i))
        settled = spent >= cap and post[best] >= SETTLE
        sure = post[best] >= (NOTHING if best == m else budget.confidence)
        if sure or (settled and best < m) or spent >= limit:
            return Located(best, post[best])
        below, split, most = 0.0, 1, -1.0
        for j in asked:
            below += post[j - 1]
            gain = _information(below, noise)
            if gain > most + 1e-12:
                split, most = j, gain
        update(split, evidence.measure(prefixes[split]))
        spent += 1


@dataclass(frozen=True)
class Culprit:
    units: frozenset[int]
    confidence: float  # of the location that named its last member


def binary(
    n: int,
    evidence: Evidence,
    noise: Noise = Noise(),
    budget: Budget = Budget(),
    *,
    open_end: bool = False,
) -> list[Culprit] | None:
    found = locate(range(n), frozenset(), evidence, noise, budget, open_end=open_end)
    if found.position == n:
        return None
    return [Culprit(frozenset({found.position}), found.confidence)]


def minimal(
    items: Sequence[int],
    fixed: frozenset[int],
    evidence: Evidence,
    noise: Noise = Noise(),
    budget: Budget = Budget(),
    *,
    open_end: bool = False,
) -> Culprit | None:
    """A set of items that regresses with `fixed` applied and none of whose members can be left
    out along the path the search took (fixed | items is known to regress, unless
    `open_end`: None when it does not)."""
    found = locate(items, fixed, evidence, noise, budget, open_end=open_end)
    i = found.position
    if i == len(items):
        return None
    named = items[i]
    # The named unit not regressing alone makes it part of a group: a miss there would turn
    # a single culprit into a pair, so that SAME is only believed when measured twice.
    if i == 0 or evidence.ask(fixed | {named}, twice=True):
        return Culprit(frozenset({named}), found.confidence)
    partners = minimal(items[:i], fixed | {named}, evidence, noise, budget)
    assert partners is not None
    group = frozenset({named}) | partners.units
    # Each member must be needed: a partner that regresses without the others (a gate that
    # missed a regression on the way sends the search past the real culprit) is the culprit
    # alone. For a pair this is one more gate: the partner alone.
    for member in sorted(group):
        if len(group) > 1 and evidence.ask(fixed | (group - {member})):
            group = group - {member}
    return Culprit(group, found.confidence)


def interaction(
    n: int,
    evidence: Evidence,
    noise: Noise = Noise(),
    budget: Budget = Budget(),
    *,
    open_end: bool = False,
) -> list[Culprit] | None:
    found: list[Culprit] = []
    remaining = list(range(n))
    while remaining:
        culprit = minimal(remaining, frozenset(), evidence, noise, budget, open_end=open_end)
        if culprit is None:
            return None
        open_end = False
        found.append(culprit)
        remaining = [i for i in remaining if i not in culprit.units]
        if not remaining or not evidence.ask(frozenset(remaining)):
            break
    return found


def bisect(
    mode: Mode, n: int, gate: Gate, noise: Noise = Noise(), *, refused: bool = False
) -> list[Culprit] | None:
    """The culprits, or None when the candidate does not regress (nothing to bisect).

    The whole candidate is not gated first: the first location has one more hypothesis than
    the units, "none of them", and the whole is a prefix like the others, gated only when its
    verdict tells the most (a smaller prefix that regresses already shows the candidate does).
    So one culprit among n units costs ceil(log2(n + 1)) gates without noise, plus one spare
    gate for a doubtful position (Budget).

    `refused` (--bad GATE.json): the whole candidate's first verdict is that gate's
    (gate(whole, 1) answers it, no gate spent): it counts as one measurement, which leaves
    "none" unlikely, and the gate it saves is a second look at the last SAME (IN_HAND)."""
    evidence = Evidence(gate)
    budget = Budget()
    if refused:
        evidence.measure(frozenset(range(n)))
        budget = IN_HAND
    if mode == "binary":
        return binary(n, evidence, noise, budget, open_end=True)
    return interaction(n, evidence, noise, budget, open_end=True)
