"""The searches over change units, as functions of a noisy gate: gate(subset, attempt) is True
when the baseline with that subset of units applied regressed on its `attempt`-th measurement
(1 = first). The baseline alone (the empty subset) is known good. Units are indices 0..n-1.

`bisect()` is the whole search `validators bisect` runs (and benchmarks/bisect_search.py
drives with a simulated gate): the whole candidate first (measured once more when it passes;
two passes: nothing to bisect; a refused gate's JSON answers the first measurement), then:

- `binary`: one culprit, the first unit in order whose prefix regresses. The prefix is found
  by a noisy bisection (`locate`): a posterior over the position, updated with the gate's
  measured power and false-alarm rate, the next prefix the one whose verdict tells the most
  about the position (mutual information; without noise, the half-and-half split). A prefix
  measured before is measured again when it still tells the most: a SAME that contradicts
  the later verdicts gets a second look. It stops when the named position is >= 99% likely
  or after the gates a noiseless bisection of the positions still open needs (ceil(log2 m)
  at first), one more when the refused gate's JSON answered the whole candidate; past those
  it goes on only while the named position is less likely than not (up to 2 x + 2 gates).
- `interaction`: the same location, then (1) the named unit alone (a SAME believed only from
  two measurements), and if it does not regress alone, its partners are located among the units before it with it applied (a regression
  that needs two or more units names all of them), and (2) the candidate without the units
  named so far: when that still regresses, there is another culprit and the search goes on.
  A group of several is then checked member by member (each must be needed: the group without
  it must not regress), which also undoes a location sent astray by a missed regression.

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
    (benchmarks/results/gate_power.json, `verified`). A test checks they stay in step."""

    power: float = 0.97555
    false_alarm: float = 0.0024970022987352847


CONFIDENCE = 0.99  # a located position this likely is named without more gates
SETTLE = 0.5  # past its planned gates, a search goes on while the named one is less likely


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
    spare: int = 0,
) -> Located:
    """The position i of the first item whose prefix regresses: fixed | items[:i+1] regresses,
    fixed | items[:i] does not (fixed | items is known to regress, fixed alone not to).
    Verdicts already seen for these prefixes count from the start. At most ceil(log2 m) +
    `spare` gates: the spare ones only while the named position is below CONFIDENCE."""
    m = len(items)
    if m == 1:
        return Located(0, 1.0)
    prefixes = [fixed | frozenset(items[:j]) for j in range(m + 1)]
    post = [1.0 / m] * m

    def update(j: int, regressed: bool) -> None:
        # prefix j regresses when the first regressing position i is below j
        for i in range(m):
            if i < j:
                post[i] *= noise.power if regressed else 1.0 - noise.power
            else:
                post[i] *= noise.false_alarm if regressed else 1.0 - noise.false_alarm
        total = sum(post)
        for i in range(m):
            post[i] /= total

    for j in range(1, m):
        for verdict in evidence.seen.get(prefixes[j], []):
            update(j, verdict)
    # What a noiseless bisection would still need: the positions the verdicts seen so far
    # leave open (a tenth of the likeliest's posterior or more).
    open_ = sum(p >= 0.1 * max(post) for p in post)
    cap = math.ceil(math.log2(open_)) + spare
    limit = 2 * cap + 2
    spent = 0
    while True:
        best = max(range(m), key=lambda i: (post[i], -i))
        settled = spent >= cap and post[best] >= SETTLE
        if post[best] >= CONFIDENCE or settled or spent >= limit:
            return Located(best, post[best])
        below, split, most = 0.0, 1, -1.0
        for j in range(1, m):
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


def binary(n: int, evidence: Evidence, noise: Noise = Noise(), spare: int = 0) -> list[Culprit]:
    found = locate(range(n), frozenset(), evidence, noise, spare)
    return [Culprit(frozenset({found.position}), found.confidence)]


def minimal(
    items: Sequence[int],
    fixed: frozenset[int],
    evidence: Evidence,
    noise: Noise = Noise(),
    spare: int = 0,
) -> Culprit:
    """A set of items that regresses with `fixed` applied and none of whose members can be left
    out along the path the search took (fixed | items is known to regress)."""
    found = locate(items, fixed, evidence, noise, spare)
    i = found.position
    named = items[i]
    # The named unit not regressing alone makes it part of a group: a miss there would turn
    # a single culprit into a pair, so that SAME is only believed when measured twice.
    if i == 0 or evidence.ask(fixed | {named}, twice=True):
        return Culprit(frozenset({named}), found.confidence)
    group = frozenset({named}) | minimal(items[:i], fixed | {named}, evidence, noise, spare).units
    # Each member must be needed: a partner that regresses without the others (a gate that
    # missed a regression on the way sends the search past the real culprit) is the culprit
    # alone. For a pair this is one more gate: the partner alone.
    for member in sorted(group):
        if len(group) > 1 and evidence.ask(fixed | (group - {member})):
            group = group - {member}
    return Culprit(group, found.confidence)


def interaction(
    n: int, evidence: Evidence, noise: Noise = Noise(), spare: int = 0
) -> list[Culprit]:
    found: list[Culprit] = []
    remaining = list(range(n))
    while remaining:
        culprit = minimal(remaining, frozenset(), evidence, noise, spare)
        found.append(culprit)
        remaining = [i for i in remaining if i not in culprit.units]
        if not remaining or not evidence.ask(frozenset(remaining)):
            break
    return found


def bisect(
    mode: Mode, n: int, gate: Gate, noise: Noise = Noise(), *, refused: bool = False
) -> list[Culprit] | None:
    """The culprits, or None when the whole candidate passed twice (nothing to bisect).

    A bisect starts because a gate refused the candidate. `refused`: the whole candidate's
    first verdict is that gate's (gate(whole, 1) answers it without gating): the gate the
    bisect would spend on the whole goes to one confirming gate per location instead, when
    the named position is below CONFIDENCE. Otherwise the whole is gated first, and a pass,
    which contradicts the refusal, is measured once more before giving up. Either way one
    culprit costs at most ceil(log2 n) + 1 gates of the bisect's own."""
    evidence = Evidence(gate)
    whole = frozenset(range(n))
    if not evidence.measure(whole) and not evidence.measure(whole):
        return None
    spare = 1 if refused else 0
    if mode == "binary":
        return binary(n, evidence, noise, spare)
    return interaction(n, evidence, noise, spare)
