"""The searches of validators/bisect/search.py against a known truth, every culprit position.

The test function here stands for the gate of an intermediate stack (tests/bisect/
test_bisect_cli.py runs the real ones): it answers from the true culprit groups, and counts
each distinct subset once, as the bisect's state file does.
"""

from __future__ import annotations

import itertools
import math

import pytest

from validators.bisect.search import binary, interaction, minimal


class Truth:
    def __init__(self, *groups: set[int]) -> None:
        self.groups = [frozenset(g) for g in groups]
        self.asked: dict[frozenset[int], bool] = {}

    def __call__(self, subset: frozenset[int]) -> bool:
        if subset not in self.asked:
            self.asked[subset] = any(g <= subset for g in self.groups)
        return self.asked[subset]

    def whole(self, n: int) -> bool:
        return self(frozenset(range(n)))


@pytest.mark.parametrize("n", [1, 2, 3, 8, 13, 16, 60])
def test_binary_names_every_single_culprit_in_log2_plus_1_gates(n: int) -> None:
    for culprit in range(n):
        truth = Truth({culprit})
        assert truth.whole(n)
        assert binary(n, truth) == [frozenset({culprit})]
        assert len(truth.asked) <= math.ceil(math.log2(n)) + 1 if n > 1 else len(truth.asked) == 1


@pytest.mark.parametrize("n", [2, 5, 8, 16])
def test_interaction_names_a_single_culprit_in_log2_plus_3_gates(n: int) -> None:
    for culprit in range(n):
        truth = Truth({culprit})
        truth.whole(n)
        assert interaction(n, truth) == [frozenset({culprit})]
        assert len(truth.asked) <= math.ceil(math.log2(n)) + 3


@pytest.mark.parametrize("n", [2, 4, 8])
def test_interaction_names_both_units_of_every_pair_that_regresses_only_together(n: int) -> None:
    for a, b in itertools.combinations(range(n), 2):
        truth = Truth({a, b})
        truth.whole(n)
        assert interaction(n, truth) == [frozenset({a, b})], (a, b)


def test_interaction_names_two_and_three_independent_culprits() -> None:
    for picked in itertools.combinations(range(8), 2):
        truth = Truth(*({p} for p in picked))
        truth.whole(8)
        assert sorted(interaction(8, truth), key=min) == [frozenset({p}) for p in picked]
    truth = Truth({1}, {4, 6}, {7})
    truth.whole(10)
    assert sorted(interaction(10, truth), key=min) == [{1}, {4, 6}, {7}]


def test_binary_blames_the_later_unit_of_a_pair_alone() -> None:
    """What `--search binary` cannot see (docs/bisect.md says so)."""
    truth = Truth({2, 5})
    truth.whole(8)
    assert binary(8, truth) == [frozenset({5})]


def test_a_triple_needing_all_three_is_named_whole() -> None:
    truth = Truth({0, 3, 5})
    truth.whole(6)
    assert minimal(range(6), frozenset(), truth) == {0, 3, 5}


def test_the_same_answers_walk_the_same_path() -> None:
    """A re-run answered from the state file asks for exactly the same subsets, in order."""
    first: list[frozenset[int]] = []
    second: list[frozenset[int]] = []
    for log in (first, second):
        truth = Truth({3}, {9})

        def test(s: frozenset[int], t: Truth = truth, log: list[frozenset[int]] = log) -> bool:
            log.append(s)
            return t(s)

        test(frozenset(range(12)))
        interaction(12, test)
    assert first == second
