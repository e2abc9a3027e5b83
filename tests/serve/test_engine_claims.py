"""Numbers an engine reports are claims (issue 23 section 3).

Each attack is a real server process on 127.0.0.1 (the synthetic token server with `--lie` or
`--raw-event`) that streams 16 tokens and reports something else as usage.completion_tokens,
or sends an event that is not an OpenAI completions chunk. The benchmark must fail the
request naming the server's claim and what the stream showed, never turn the claim into a
throughput, and never print a traceback.
"""

from __future__ import annotations

import json

import pytest

from stackgate.manifest import BenchSettings
from validators.serve import bench_client
from validators.serve.bench_client import SseParser
from validators.serve.group import run_group

from .conftest import by_check, synthetic_server

pytestmark = pytest.mark.timeout(120)


SETTINGS = BenchSettings(input_len=8, output_len=16, rounds=1, request_timeout_s=30)

# (server flags, what the failed request's error must say)
LIES = {
    "final claim 10x": (["--lie", "final-x10"], "claims 160 completion_tokens, more than the 16"),
    "every chunk 10x": (["--lie", "all-x10"], "more than the 16 the request allowed"),
    "1e30 tokens": (["--lie", "huge"], "claims 1000000000000000000000000000000 completion"),
    "negative count": (["--lie", "negative"], "is -1, a negative count"),
    "count as a string": (["--lie", "string"], "is '1', not a whole number"),
    "count goes down": (["--lie", "down", "--tokens-per-chunk", "2"], "went down from"),
    "final claim above the chunks, under max_tokens": (
        ["--lie", "few-chunks", "--tokens-per-chunk", "1"],
        "the server claims 16 completion tokens, its streamed chunks counted 8",
    ),
    "event is a JSON array": (["--raw-event", "[1, 2, 3]"], "event is not a JSON object"),
    "event is not JSON": (["--raw-event", "{nope"], "event is not JSON"),
    "text is a number": (["--raw-event", '{"choices": [{"text": 7}]}'], "text is 7"),
    "usage is a list": (["--raw-event", '{"choices": [], "usage": [1]}'], "usage is [1]"),
}


@pytest.mark.parametrize("name", list(LIES))
def test_a_lying_server_fails_the_level_naming_the_claim(
    name: str, capfd: pytest.CaptureFixture[str]
) -> None:
    flags, said = LIES[name]
    with synthetic_server("--rate", "4000", *flags) as url:
        m = bench_client.run_level(bench_client.Target(url, "synthetic"), SETTINGS, 2)
    assert m["completed"] == 0 and m["failed"] == 8, m.get("errors")
    assert any(said in e for e in m["errors"]), m["errors"]
    # the claim never became a number: no tokens, no throughput
    assert m["total_output_tokens"] == 0 and m["output_throughput"] == 0.0
    assert m["max_output_tokens_per_s"] == 0.0
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception in callback" not in err


def test_an_honest_server_with_multi_token_chunks_still_passes() -> None:
    with synthetic_server("--rate", "4000", "--tokens-per-chunk", "3") as url:
        m = bench_client.run_level(bench_client.Target(url, "synthetic"), SETTINGS, 2)
    assert m["completed"] == 8 and m["failed"] == 0
    assert m["total_output_tokens"] == 16 * 8


def test_serve_bench_fails_and_names_both_numbers(make_ctx, capfd) -> None:  # type: ignore[no-untyped-def]
    checks = by_check(run_group(make_ctx("--lie", "few-chunks")))
    sweep, single = checks["sweep"], checks["single_stream"]
    assert sweep.status == "FAIL" and single.status == "FAIL"
    assert "request(s) failed" in sweep.reason
    text = json.dumps(sweep.evidence["errors"])
    assert "claims 16 completion tokens" in text and "counted 8" in text
    assert "IMPROVEMENT" not in text
    err = capfd.readouterr().err
    assert "Traceback" not in err


def test_parser_checks_without_a_server() -> None:
    """The same rules on bytes: cumulative counts as vLLM/SGLang send them pass; a final
    usage-only chunk that runs ahead of the chunks fails; a count under the text chunks
    fails; max_tokens bounds every count."""
    honest = [{"choices": [{"text": " a"}], "usage": {"completion_tokens": i}} for i in (1, 2, 3)]
    honest.append({"choices": [], "usage": {"completion_tokens": 3, "prompt_tokens": 4}})
    p = SseParser(max_tokens=3)
    for e in honest:
        p.feed(f"data: {json.dumps(e)}\n\n".encode())
    assert not p.error and p.check_claims() == "" and p.output_tokens == 3

    ahead = [*honest[:3], {"choices": [], "usage": {"completion_tokens": 9}}]
    p = SseParser(max_tokens=100)
    for e in ahead:
        p.feed(f"data: {json.dumps(e)}\n\n".encode())
    assert "claims 9 completion tokens, its streamed chunks counted 3" in p.check_claims()

    under = [{"choices": [{"text": " a"}]}] * 5 + [{"choices": [], "usage": {"completion_tokens": 2}}]
    p = SseParser(max_tokens=100)
    for e in under:
        p.feed(f"data: {json.dumps(e)}\n\n".encode())
    assert "claims 2 completion tokens, the stream carried 5 chunks" in p.check_claims()

    # Not a false alarm: end-of-sequence tokens (ignore_eos) stream as chunks with empty text
    # and a growing count, then vLLM's usage-only chunk repeats the total.
    eos = [{"choices": [{"text": ""}], "usage": {"completion_tokens": i}} for i in (4, 5, 6, 7)]
    p = SseParser(max_tokens=8)
    for e in [*honest[:3], *eos, {"choices": [], "usage": {"completion_tokens": 7}}]:
        p.feed(f"data: {json.dumps(e)}\n\n".encode())
    assert not p.error and p.check_claims() == "" and p.output_tokens == 7

    p = SseParser(max_tokens=4)
    for _ in range(6):
        p.feed(b'data: {"choices": [{"text": "x"}]}\n\n')
    assert "carried 5 tokens, more than the 4" in p.error

    p = SseParser(max_tokens=4)
    p.feed(b'data: {"choices": [{"text": "x"}], "usage": {"completion_tokens": true}}\n\n')
    assert "not a whole number" in p.error
