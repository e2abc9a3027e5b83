"""The searches over change units, as pure functions of a test: test(subset) is True when the
baseline with that subset of units applied regresses. The baseline alone (the empty subset)
is known good; the caller has seen the whole candidate regress. Units are indices 0..n-1.

- `binary`: git bisect over prefixes of the unit list: ceil(log2 n) tests after the whole
  candidate's. It names one unit, the first in order whose prefix regresses; a regression that
  needs two units together is blamed on the later one alone, a second culprit is not looked for.
- `interaction`: the same bisection, then (1) the named unit alone, and if it does not regress
  alone, its partners are bisected among the units before it with it applied (so a regression
  that needs two or more units names all of them), and (2) the candidate without the units
  named so far: when that still regresses, there is another culprit and the search goes on.
  A group of several is then checked member by member (each must be needed: the group without
  it must not regress), which also undoes a bisection sent astray by a missed regression.
  A single culprit costs ceil(log2 n) + 2 tests after the whole candidate's; a pair one more.

Both are deterministic given the answers, so a re-run answering from a cache walks the same path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

Test = Callable[[frozenset[int]], bool]
Mode = Literal["binary", "interaction"]
MODES: tuple[Mode, ...] = ("binary", "interaction")


def first_regressing(items: Sequence[int], fixed: frozenset[int], test: Test) -> int:
    """The position i of the first item whose prefix regresses: test(fixed | items[:i+1]) True,
    test(fixed | items[:i]) False; test(fixed | items) is known True, test(fixed) False."""
    lo, hi = 0, len(items)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if test(fixed | frozenset(items[:mid])):
            hi = mid
        else:
            lo = mid
    return hi - 1


def binary(n: int, test: Test) -> list[frozenset[int]]:
    return [frozenset({first_regressing(range(n), frozenset(), test)})]


def minimal(items: Sequence[int], fixed: frozenset[int], test: Test) -> frozenset[int]:
    """A set of items that regresses with `fixed` applied and none of whose members can be left
    out along the path the bisection took (test(fixed | items) is known True)."""
    i = first_regressing(items, fixed, test)
    named = items[i]
    if i == 0 or test(fixed | {named}):
        return frozenset({named})
    group = frozenset({named}) | minimal(items[:i], fixed | {named}, test)
    # Each member must be needed: a partner that regresses without the others (a gate that
    # missed a regression on the way sends the bisection past the real culprit) is the
    # culprit alone. For a pair this is one more gate: the partner alone.
    for member in sorted(group):
        if len(group) > 1 and test(fixed | (group - {member})):
            group = group - {member}
    return group


def interaction(n: int, test: Test) -> list[frozenset[int]]:
    found: list[frozenset[int]] = []
    remaining = list(range(n))
    while remaining:
        culprit = minimal(remaining, frozenset(), test)
        found.append(culprit)
        remaining = [i for i in remaining if i not in culprit]
        if not remaining or not test(frozenset(remaining)):
            break
    return found


def search(mode: Mode, n: int, test: Test) -> list[frozenset[int]]:
    return binary(n, test) if mode == "binary" else interaction(n, test)
