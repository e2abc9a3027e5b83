"""An engine's token counts re-counted with the model's own tokenizer (issue 23 section 3).

The servers are the synthetic token server (a real process on 127.0.0.1) lying in ways the
stream's shape cannot show: every chunk's usage agrees with the final claim, but each chunk of
one token claims 10 (or 2, or 1.5), chunks of empty text claim tokens, chunks of 4 tokens claim
one. The tokenizer is a real tokenizer.json (a word-level one made here with the `tokenizers`
library) loaded by a real env's python (a venv holding `tokenizers`, built from PyPI once and
cached), as serve-bench loads the served model's tokenizer in the stack's env.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from stackgate.manifest import BenchSettings
from validators.serve import bench_client
from validators.serve.group import run_group
from validators.serve.recount import Recheck, Recounter, RecountUnavailable, disagreement

from .conftest import by_check, synthetic_server
from .engine_env import tokenizers_env

pytestmark = [pytest.mark.network, pytest.mark.timeout(300)]

SETTINGS = BenchSettings(input_len=8, output_len=20, rounds=1, request_timeout_s=30)

_MAKE_TOKENIZER = """
import sys
from tokenizers import Tokenizer, models, pre_tokenizers
vocab = {"[UNK]": 0, "t": 1, **{f"w{i}": 2 + i for i in range(97)}}
tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tok.save(sys.argv[1] + "/tokenizer.json")
"""


@pytest.fixture(scope="module")
def env() -> Path:
    return tokenizers_env()


@pytest.fixture(scope="module")
def model_dir(env: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model folder holding only its tokenizer (what the re-count reads of it)."""
    folder = tmp_path_factory.mktemp("model")
    subprocess.run([str(env / "bin" / "python"), "-c", _MAKE_TOKENIZER, str(folder)], check=True)
    return folder


@pytest.fixture
def recheck(env: Path, model_dir: Path) -> Iterator[Recheck]:
    checker = Recheck(Recounter.start(str(env / "bin" / "python"), str(model_dir),
                                      trust_remote_code=False))  # fmt: skip
    yield checker
    checker.close()


# server flags -> what the failed requests' errors say (claim 20 = max_tokens).
LIES = {
    "chunks of one token claim 10 each": (
        ["--lie", "chunks-x10"], "claims 20 completion tokens, its streamed text re-counts to 2"),
    "chunks of one token claim 2 each": (
        ["--lie", "chunks-x2"], "claims 20 completion tokens, its streamed text re-counts to 10"),
    "chunks of one token claim 1.5 each": (
        ["--lie", "chunks-x1.5"], "claims 19 completion tokens, its streamed text re-counts to 13"),
    "chunks of two tokens claim 20 each": (
        ["--lie", "chunks-x10", "--tokens-per-chunk", "2"], "re-counts to 2 tokens"),
    "empty chunks claim 10 each": (
        ["--lie", "empty-x10"], "re-counts to 0 tokens with the model's tokenizer and 2 chunks"),
    "a NaN count (json.dumps writes NaN, Python reads it)": (
        ["--lie", "nan"], "usage.completion_tokens is nan, not a whole number"),
    "chunks of 4 tokens claim one each": (
        ["--lie", "under", "--tokens-per-chunk", "4"],
        "claims 5 completion tokens, its streamed text re-counts to 20 tokens"),
}


@pytest.mark.parametrize("name", list(LIES))
def test_claims_the_text_does_not_bear_out_fail_naming_both(name: str, recheck: Recheck) -> None:
    flags, said = LIES[name]
    with synthetic_server("--rate", "4000", *flags) as url:
        target = bench_client.Target(url, "synthetic")
        m = bench_client.run_level(target, SETTINGS, 2, check=recheck)
    assert m["completed"] == 0 and m["failed"] == 8, m.get("errors")
    assert any(said in e for e in m["errors"]), m["errors"]
    assert m["total_output_tokens"] == 0 and m["output_throughput"] == 0.0
    status, reason, evidence = recheck.verdict()
    if "re-counts" not in said:  # refused by the stream's own checks, before any re-count
        assert evidence["requests"] == 0
        return
    assert status == "FAIL" and "8 of 8 requests" in reason and said in reason
    assert evidence["requests"] == 8 and len(evidence["disagreements"]) == 5


@pytest.mark.parametrize(
    "flags", [["--tokens-per-chunk", "1"], ["--tokens-per-chunk", "3"], ["--lie", "no-usage"]]
)
def test_honest_counts_pass_and_a_server_without_usage_is_counted(
    flags: list[str], recheck: Recheck
) -> None:
    """Honest servers (1 or 3 tokens a chunk) agree with the tokenizer exactly. A server that
    reports no usage gets its tokens from the tokenizer, not one per chunk."""
    with synthetic_server("--rate", "4000", "--tokens-per-chunk", "4", *flags) as url:  # 4 unless given
        m = bench_client.run_level(bench_client.Target(url, "synthetic"), SETTINGS, 2,
                                   check=recheck)  # fmt: skip
    assert m["completed"] == 8 and m["failed"] == 0, m.get("errors")
    assert m["total_output_tokens"] == 20 * 8
    status, reason, evidence = recheck.verdict()
    assert status == "PASS", reason
    assert evidence["claimed_tokens"] == evidence["recounted_tokens"] == 160
    assert evidence["counted_by_tokenizer"] == (8 if "no-usage" in flags else 0)


def test_serve_bench_fails_the_level_and_token_counts(make_ctx, env: Path, model_dir: Path) -> None:  # type: ignore[no-untyped-def]
    ctx = make_ctx("--lie", "chunks-x10", model_path=str(model_dir), served_model_name="synthetic")
    checks = by_check(run_group(dataclasses.replace(ctx, env_path=env)))
    assert checks["sweep"].status == "FAIL" and checks["single_stream"].status == "FAIL"
    counts = checks["token_counts"]
    assert counts.status == "FAIL", counts.reason
    assert "claims 10 completion tokens, its streamed text re-counts to 1 tokens" in counts.reason
    assert counts.evidence["tokenizer"].startswith("tokenizers ")
    assert "IMPROVEMENT" not in json.dumps(checks["sweep"].evidence)


def test_a_tokenizer_that_cannot_load_or_answer_is_said_so(
    env: Path, tmp_path: Path
) -> None:
    """No tokenizer file, a python that hangs loading it (a stand-in script for an env whose
    import never returns), one that answers garbage: each is RecountUnavailable naming why,
    within the bound, and leaves no process behind."""
    python = str(env / "bin" / "python")
    with pytest.raises(RecountUnavailable, match="no tokenizer for"):
        Recounter.start(python, str(tmp_path / "nowhere"), trust_remote_code=False)
    hang = tmp_path / "hang-python"
    hang.write_text("#!/bin/sh\nexec sleep 600\n")
    hang.chmod(0o755)
    with pytest.raises(RecountUnavailable, match="took over 1 s loading the tokenizer"):
        Recounter.start(str(hang), str(tmp_path), trust_remote_code=False, timeout_s=1)
    garbage = tmp_path / "garbage-python"
    garbage.write_text("#!/bin/sh\necho '[1, 2]'\nexec sleep 600\n")
    garbage.chmod(0o755)
    with pytest.raises(RecountUnavailable, match="no tokenizer for"):
        Recounter.start(str(garbage), str(tmp_path), trust_remote_code=False)
    assert not psutil.Process().children(), "a tokenizer process was left running"


def test_the_bound_itself() -> None:
    """The rule without servers: honest merging (16 claimed, 15 re-counted) and byte tokens
    re-counting as more (16 claimed, 28 re-counted) pass; 15% + 2 over fails; a claim under a
    third of the text fails."""
    assert disagreement(16, 15, 0) == ""
    assert disagreement(16, 28, 0) == ""
    assert disagreement(20, 16, 0) == ""  # 16 * 1.15 + 2 = 20.4
    assert "claims 21" in disagreement(21, 16, 0)
    assert disagreement(21, 16, 1) == ""  # an end-of-sequence token streamed as ""
    assert "more than 3x" in disagreement(5, 18, 0)
