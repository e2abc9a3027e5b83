"""Greedy-output comparison and exact arithmetic scoring."""

from __future__ import annotations

from validators.serve.correctness import (
    ARITHMETIC,
    PROMPTS,
    Reference,
    Sample,
    arithmetic_score,
    compare,
)


def _ref(texts: list[str], tokens: list[list[str]] | None = None) -> Reference:
    greedy = [Sample(prompt=p, text=t, tokens=tokens[i] if tokens else None)
              for i, (p, t) in enumerate(zip(PROMPTS, texts, strict=False))]
    return Reference(stack="cu130", profile="p", model="m", created="now", greedy=greedy,
                     arithmetic=[], arithmetic_correct=0)


def test_identical_outputs_agree_fully() -> None:
    texts = [f" answer {i}." for i in range(len(PROMPTS))]
    cmp = compare(_ref(texts), _ref(texts).greedy)
    assert cmp.exact_match == 1.0 and cmp.token_agreement == 1.0 and cmp.mismatches == []


def test_divergence_counts_the_shared_prefix_only() -> None:
    ref = _ref([" a b c d"] + [" same"] * (len(PROMPTS) - 1))
    cand = _ref([" a b x d"] + [" same"] * (len(PROMPTS) - 1)).greedy
    cmp = compare(ref, cand)
    assert cmp.unit == "text-pieces"
    assert cmp.exact_match == (len(PROMPTS) - 1) / len(PROMPTS)
    # " a b c d" -> pieces [' ', 'a', ' ', 'b', ' ', 'c', ' ', 'd']: 5 of 8 shared before 'x'.
    assert cmp.token_agreement == (5 / 8 + len(PROMPTS) - 1) / len(PROMPTS)
    assert cmp.mismatches[0]["got"] == " a b x d"


def test_server_tokens_are_used_when_both_sides_have_them() -> None:
    toks = [["▁a", "▁b"]] * len(PROMPTS)
    cmp = compare(_ref([" a b"] * len(PROMPTS), toks), _ref([" a b"] * len(PROMPTS), toks).greedy)
    assert cmp.unit == "tokens"


def test_arithmetic_is_scored_exactly() -> None:
    right = [Sample(prompt=p, text=f" {answer}\n2 + 2 = 4") for p, answer in ARITHMETIC]
    assert arithmetic_score(right)[0] == len(ARITHMETIC)
    wrong = [Sample(prompt=p, text=f" {answer}0") for p, answer in ARITHMETIC]
    correct, misses = arithmetic_score(wrong)
    assert correct == 0 and len(misses) == len(ARITHMETIC)
