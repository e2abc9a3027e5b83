"""Output correctness: greedy outputs compared with a recording from the known-good stack.

A broken stack (a wrong kernel, a bad all-reduce) often emits fluent garbage instead of
crashing. The fixed prompt set is decoded greedily (temperature 0) one request at a time; the
known-good stack's outputs are recorded once (`record`), a candidate's are compared
(`compare`): exact-match rate over prompts and token agreement (shared prefix length over the
longer output, averaged). A small arithmetic set is scored exactly, and a candidate must solve
at least as many items as the known-good stack did.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict

from stackgate.files import atomic_write_text, read_json_file

REFERENCE_SCHEMA = 1
MAX_TOKENS = 32

PROMPTS: tuple[str, ...] = (
    "The capital city of France is",
    "Water boils at a temperature of",
    "The three primary colors are",
    "def fibonacci(n):\n    ",
    "Photosynthesis is the process by which",
    "The first person to walk on the Moon was",
    "In computer science, a hash table is",
    "SELECT name, age FROM users WHERE",
    "The largest planet in the solar system is",
    "To make a cup of tea, first",
    "The speed of light in a vacuum is approximately",
    "import numpy as np\narr = np.",
    "Once upon a time, in a small village,",
    "The chemical formula for table salt is",
    "A prime number is a natural number that",
    "The Pythagorean theorem states that",
)

# Few-shot lines work for base and chat models alike through the raw completions API.
_SHOTS = "2 + 3 = 5\n10 + 7 = 17\n"
ARITHMETIC: tuple[tuple[str, str], ...] = tuple(
    (f"{_SHOTS}{a} + {b} =", str(a + b))
    for a, b in ((12, 30), (45, 27), (8, 91), (123, 456), (77, 77), (305, 198), (19, 6), (250, 750))
) + tuple(
    (f"3 * 4 = 12\n5 * 6 = 30\n{a} * {b} =", str(a * b))
    for a, b in ((7, 8), (12, 11), (9, 9), (25, 4))
)

_PIECES = re.compile(r"\w+|[^\w\s]|\s+")
_FIRST_INT = re.compile(r"-?\d+")


class Sample(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prompt: str
    text: str
    tokens: list[str] | None = None  # from logprobs.tokens when the server returns them


class Reference(BaseModel):
    """What the known-good stack produced; committed next to the stack or kept per host."""

    model_config = ConfigDict(extra="forbid")
    schema_version: int = REFERENCE_SCHEMA
    stack: str
    profile: str
    model: str
    max_tokens: int = MAX_TOKENS
    created: str
    greedy: list[Sample]
    arithmetic: list[Sample]
    arithmetic_correct: int


@dataclass(frozen=True)
class Comparison:
    exact_match: float
    token_agreement: float
    unit: str  # "tokens" or "text-pieces"
    mismatches: list[dict[str, str]]


def _complete(client: httpx.Client, base_url: str, model: str, prompt: str) -> Sample:
    body = {
        "model": model,
        "prompt": prompt,
        "max_tokens": MAX_TOKENS,
        "temperature": 0.0,
        "logprobs": 1,
    }
    resp = client.post(f"{base_url}/v1/completions", json=body)
    if resp.status_code != 200:
        raise RuntimeError(f"HTTP {resp.status_code} from /v1/completions: {resp.text[:300]}")
    choice = resp.json()["choices"][0]
    logprobs = choice.get("logprobs") or {}
    tokens = logprobs.get("tokens") if isinstance(logprobs, dict) else None
    return Sample(prompt=prompt, text=choice.get("text") or "", tokens=tokens or None)


def collect(
    base_url: str,
    model: str,
    *,
    timeout_s: float = 300.0,
    checkpoint: Callable[[], None] | None = None,
) -> tuple[list[Sample], list[Sample]]:
    """Greedy outputs for PROMPTS and ARITHMETIC, one request at a time (no batch effects).
    `checkpoint` runs before each request (serve-bench: raises when a signal came)."""
    between = checkpoint or (lambda: None)
    with httpx.Client(timeout=timeout_s) as client:
        greedy: list[Sample] = []
        for p in PROMPTS:
            between()
            greedy.append(_complete(client, base_url, model, p))
        arithmetic: list[Sample] = []
        for p, _ in ARITHMETIC:
            between()
            arithmetic.append(_complete(client, base_url, model, p))
    return greedy, arithmetic


def arithmetic_score(samples: Sequence[Sample]) -> tuple[int, list[dict[str, str]]]:
    """(correct count, wrong items): the first integer of each answer must equal the sum."""
    correct = 0
    wrong: list[dict[str, str]] = []
    for sample, (_, expected) in zip(samples, ARITHMETIC, strict=True):
        found = _FIRST_INT.search(sample.text)
        if found is not None and found.group(0) == expected:
            correct += 1
        else:
            wrong.append(
                {
                    "prompt": sample.prompt.splitlines()[-1],
                    "expected": expected,
                    "got": sample.text[:40],
                }
            )
    return correct, wrong


def record(
    path: Path,
    *,
    stack: str,
    profile: str,
    model: str,
    greedy: list[Sample],
    arithmetic: list[Sample],
) -> Reference:
    correct, _ = arithmetic_score(arithmetic)
    ref = Reference(
        stack=stack,
        profile=profile,
        model=model,
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        greedy=greedy,
        arithmetic=arithmetic,
        arithmetic_correct=correct,
    )
    atomic_write_text(path, ref.model_dump_json(indent=2) + "\n")
    return ref


def load_reference(path: Path) -> Reference:
    # The stack's committed reference: bounded, regular file, duplicate keys refused.
    return Reference.model_validate(read_json_file(path, 8 << 20))


def _units(sample: Sample, use_tokens: bool) -> list[str]:
    if use_tokens and sample.tokens is not None:
        return sample.tokens
    return _PIECES.findall(sample.text)


def _agreement(a: Sequence[str], b: Sequence[str]) -> float:
    longest = max(len(a), len(b))
    if longest == 0:
        return 1.0
    same = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        same += 1
    return same / longest


def compare(reference: Reference, candidate: Sequence[Sample]) -> Comparison:
    """Exact-match rate and mean token agreement of candidate against the reference."""
    by_prompt = {s.prompt: s for s in reference.greedy}
    pairs = [(by_prompt[c.prompt], c) for c in candidate if c.prompt in by_prompt]
    if not pairs:
        raise ValueError("the reference has none of the candidate's prompts")
    use_tokens = all(r.tokens is not None and c.tokens is not None for r, c in pairs)
    exact = sum(r.text == c.text for r, c in pairs) / len(pairs)
    agree = sum(_agreement(_units(r, use_tokens), _units(c, use_tokens)) for r, c in pairs)
    mismatches = [
        {"prompt": r.prompt[:60], "expected": r.text[:80], "got": c.text[:80]}
        for r, c in pairs
        if r.text != c.text
    ]
    return Comparison(
        exact_match=exact,
        token_agreement=agree / len(pairs),
        unit="tokens" if use_tokens else "text-pieces",
        mismatches=mismatches[:5],
    )


def reference_summary(ref: Reference) -> dict[str, Any]:
    return {
        "stack": ref.stack,
        "profile": ref.profile,
        "created": ref.created,
        "arithmetic_correct": ref.arithmetic_correct,
    }
