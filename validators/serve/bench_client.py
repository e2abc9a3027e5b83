"""Our own streaming benchmark client (asyncio) for OpenAI-compatible /v1/completions.

Results use `sglang.bench_serving`'s field names (`output_throughput`, `mean_ttft_ms`,
`median_itl_ms`, ... plus p90 for every latency), so a record here sits next to one from it.

Method: fixed-length prompts of seeded random token ids (no dataset download), `ignore_eos`, a
warm-up of max(2, C) requests at concurrency C before each level, then `max(8, rounds x C)`
measured requests with at most C in flight. TTFT is the first chunk carrying text; a chunk of k
tokens (cumulative usage, `continuous_usage_stats`) adds k ITLs of gap/k as bench_serving does,
else each chunk is one ITL. Output lengths come from `usage.completion_tokens`, else the chunk
count; the server's count is a claim checked against the stream (SseParser.check_claims), and a
request that disagrees fails naming both numbers, failing its level. The streamed text is kept
per request for serve-bench to re-count (`run_level(check=...)`, recount.py).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.random  # eager, not lazily inside run_level (see there)

from stackgate.credentials import redact
from stackgate.manifest import BenchSettings
from validators.serve.owned_loop import run_owned
from validators.serve.sse_transport import HttpError, StreamingClient

# Words for `prompt_format = "text"` servers (those that take no token ids): common English
# words, mostly one token each in BPE vocabularies.
_WORDS = tuple(
    " ".join(
        (
            "the of and to in is that it for was on are as with his they at be this from have or",
            "by one had not but what all were when we there can an your which their said if do",
            "will each about how up out them then she many some so these would other into has",
            "more her two like him see time could no make than first been its who now people my",
            "made over did down only way find use may water long little very after words called",
            "just where most know get through back",
        )
    ).split()
)


@dataclass(frozen=True)
class Target:
    base_url: str
    model: str


@dataclass
class RequestOutcome:
    success: bool
    error: str = ""
    input_len: int = 0
    output_len: int = 0
    ttft: float = 0.0
    latency: float = 0.0
    itl: list[float] = field(default_factory=list)
    start: float = 0.0
    token_times: list[tuple[float, int]] = field(default_factory=list)
    # What the stream carried, for the re-count with the model's tokenizer (recount.py).
    text: str = ""
    empty_chunks: int = 0
    claimed: bool = False  # output_len is the server's usage.completion_tokens


def make_prompts(settings: BenchSettings, count: int, stream: int) -> list[list[int] | str]:
    """`count` prompts of settings.input_len tokens; `stream` separates warm-up from measured."""
    rng = np.random.default_rng([settings.seed, stream])
    if settings.prompt_format == "token-ids":
        low, high = settings.token_id_range
        ids = rng.integers(low, high, size=(count, settings.input_len))
        return [row.tolist() for row in ids]
    picks = rng.integers(0, len(_WORDS), size=(count, settings.input_len))
    return [" ".join(_WORDS[i] for i in row) for row in picks]


def _body(target: Target, prompt: list[int] | str, settings: BenchSettings) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": target.model,
        "prompt": prompt,
        "max_tokens": settings.output_len,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    if settings.ignore_eos:
        body["ignore_eos"] = True
    return body


# A server's own count may run ahead of what its text chunks showed by this much before the
# two disagree: a final usage-only chunk repeats the last per-chunk count (vLLM, SGLang), so an
# honest server is off by 0; 2% + 1 leaves room for a token whose text was held back.
CLAIM_SLACK_FRACTION = 0.02
CLAIM_SLACK_TOKENS = 1
# prompt_tokens beyond this is not a prompt this client sent (input_len is bounded far below).
_MAX_PROMPT_TOKENS = 10_000_000
# Streamed text kept per request for the re-count: 1 MiB plus 1 KiB per token allowed (a token
# is rarely 100 characters); a server sending more is not streaming tokens.
_TEXT_BASE_CHARS = 1 << 20
_TEXT_CHARS_PER_TOKEN = 1024


class MalformedStream(Exception):
    """An SSE event that is not what an OpenAI completions stream sends (the request fails)."""


def _count(value: object, what: str, upper: int | None) -> int:
    """A token count from the server: an int (not a bool), 0 <= value <= upper."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedStream(f"usage.{what} is {value!r}, not a whole number")
    if value < 0:
        raise MalformedStream(f"usage.{what} is {value}, a negative count")
    if upper is not None and value > upper:
        raise MalformedStream(
            f"the server claims {value} {what}, more than the {upper} the request allowed"
        )
    return value


class SseParser:
    """Incremental parser of an OpenAI completions SSE stream (pure: bytes in, counts out).

    A stream may end without `data: [DONE]` (transformers serve); a mid-stream `{"error": ...}`
    event (SGLang) is recorded as the error. A reported `usage.completion_tokens` is a claim
    (`check_claims`): a whole number, at most `max_tokens`, never decreasing, at least the number of
    chunks that carried text, and a usage-only chunk may not run ahead of the choice chunks' count
    by more than CLAIM_SLACK_*. A malformed event fails the request, naming what it was.
    """

    def __init__(self, max_tokens: int | None = None) -> None:
        self.max_tokens = max_tokens
        self.buffer = bytearray()
        self.usage_tokens = 0
        self.counted = 0
        self.saw_usage = False
        self.text_events = 0
        # Chunks carrying a choice with empty text (an end-of-sequence token under ignore_eos),
        # and the text itself: what the re-count with the model's tokenizer reads.
        self.empty_chunks = 0
        self.text_parts: list[str] = []
        self._text_chars = 0
        self._text_cap = _TEXT_BASE_CHARS + _TEXT_CHARS_PER_TOKEN * (max_tokens or 0)
        # The cumulative count carried by the last chunk that also carried a choice (vLLM/SGLang
        # continuous_usage_stats), text or not: an end-of-sequence token streamed as "" is a
        # token the stream showed. What a usage-only chunk (`choices: []`) claims after it is
        # checked against this.
        self.streamed_usage: int | None = None
        self.prompt_tokens: int | None = None
        self.done = False
        self.error = ""

    @property
    def output_tokens(self) -> int:
        return self.usage_tokens if self.saw_usage else self.text_events

    @property
    def text(self) -> str:
        return "".join(self.text_parts)

    def feed(self, raw: bytes) -> int:
        """Take bytes as they arrived; return how many new tokens they completed."""
        self.buffer += raw.replace(b"\r\n", b"\n")
        new_total = 0
        while not self.done and not self.error:
            cut = self.buffer.find(b"\n\n")
            if cut < 0:
                break
            event = bytes(self.buffer[:cut])
            del self.buffer[: cut + 2]
            for line in event.split(b"\n"):
                if line.startswith(b"data:") and not self.error and not self.done:
                    try:
                        new_total += self._data(line[5:].strip())
                    except MalformedStream as exc:
                        self.error = f"malformed stream: {exc}"[:300]
        return new_total

    def check_claims(self) -> str:
        """Why the server's final token count disagrees with the stream ("" when it agrees)."""
        if not self.saw_usage:
            return ""
        claim = self.usage_tokens
        if claim < self.text_events:
            return (
                f"the server claims {claim} completion tokens, the stream carried "
                f"{self.text_events} chunks of text"
            )
        shown = self.streamed_usage
        if shown is not None:
            slack = max(CLAIM_SLACK_TOKENS, int(shown * CLAIM_SLACK_FRACTION))
            if claim > shown + slack:
                return (
                    f"the server claims {claim} completion tokens, its streamed chunks "
                    f"counted {shown} ({self.text_events} chunks of text)"
                )
        return ""

    def _data(self, payload: bytes) -> int:
        if payload == b"[DONE]":
            self.done = True
            return 0
        try:
            data = json.loads(payload)
        except ValueError:
            raise MalformedStream(f"event is not JSON: {payload[:80]!r}") from None
        if not isinstance(data, dict):
            raise MalformedStream(f"event is not a JSON object: {payload[:80]!r}")
        if "error" in data:
            self.error = f"stream error: {str(data['error'])[:300]}"
            return 0
        has_choice, text = self._choice(data.get("choices"))
        usage = data.get("usage")
        if usage is not None and not isinstance(usage, dict):
            raise MalformedStream(f"usage is {usage!r:.80}, not an object")
        before = self.counted
        if text:
            self.text_events += 1
            self._text_chars += len(text)
            if self._text_chars > self._text_cap:
                raise MalformedStream(
                    f"the stream carried over {self._text_cap} characters of text, more than "
                    f"{self.max_tokens} tokens hold"
                )
            self.text_parts.append(text)
        elif has_choice:
            self.empty_chunks += 1
        if usage and usage.get("completion_tokens") is not None:
            # Cumulative count (SGLang/vLLM continuous_usage_stats, or only the final chunk
            # as transformers serve sends it): tokens not yet counted arrive now.
            claim = _count(usage["completion_tokens"], "completion_tokens", self.max_tokens)
            if claim < self.usage_tokens:
                raise MalformedStream(
                    f"usage.completion_tokens went down from {self.usage_tokens} to {claim}"
                )
            self.saw_usage = True
            self.usage_tokens = claim
            if has_choice:
                self.streamed_usage = claim
            self.counted = max(self.counted, claim)
            if usage.get("prompt_tokens") is not None:
                self.prompt_tokens = _count(
                    usage["prompt_tokens"], "prompt_tokens", _MAX_PROMPT_TOKENS
                )
        elif text:
            self.counted += 1  # no per-chunk count: one text event, one token
        if self.max_tokens is not None and self.counted > self.max_tokens:
            raise MalformedStream(
                f"the stream carried {self.counted} tokens, more than the {self.max_tokens} "
                "the request allowed"
            )
        return self.counted - before

    @staticmethod
    def _choice(choices: object) -> tuple[bool, str]:
        """(whether the event carries a choice, its text)."""
        if choices is None:
            return False, ""
        if not isinstance(choices, list):
            raise MalformedStream(f"choices is {choices!r:.80}, not a list")
        if not choices:
            return False, ""
        first = choices[0]
        if not isinstance(first, dict):
            raise MalformedStream(f"choices[0] is {first!r:.80}, not an object")
        text = first.get("text")
        if text is not None and not isinstance(text, str):
            raise MalformedStream(f"choices[0].text is {text!r:.80}, not a string")
        return True, text or ""


async def one_request(
    client: StreamingClient, target: Target, prompt: list[int] | str, settings: BenchSettings
) -> RequestOutcome:
    """One streamed request. Tokens that arrive in the same network read share one arrival
    time: a read carrying k tokens after a gap g adds k ITLs of g/k (bench_serving's rule for
    multi-token chunks), so a server that flushes several events at once is not credited
    with zero-latency tokens."""
    out = RequestOutcome(success=False)
    out.input_len = len(prompt) if isinstance(prompt, list) else 0
    parser = SseParser(settings.output_len)
    start = time.perf_counter()
    out.start = start
    last = [start]

    def on_body(data: bytes) -> None:
        new = parser.feed(data)
        if new:
            now = time.perf_counter()
            if not out.token_times:
                out.ttft = now - start
            else:
                out.itl.extend([(now - last[0]) / new] * new)
            out.token_times.append((now, new))
            last[0] = now

    try:
        status, error_body = await client.post_stream(
            "/v1/completions", _body(target, prompt, settings), on_body
        )
    except (HttpError, json.JSONDecodeError, OSError) as exc:
        out.error = f"{type(exc).__name__}: {exc}"[:300]
        return out
    out.latency = time.perf_counter() - start
    if status != 200:
        out.error = f"HTTP {status}: {error_body.decode(errors='replace')[:300]}"
        return out
    if parser.error:
        out.error = parser.error
        return out
    if disagreement := parser.check_claims():
        out.error = disagreement
        return out
    if parser.prompt_tokens is not None:
        out.input_len = parser.prompt_tokens
    out.output_len = parser.output_tokens
    out.text, out.empty_chunks = parser.text, parser.empty_chunks
    out.claimed = parser.saw_usage
    if out.output_len == 0:
        out.error = "no tokens streamed"
        return out
    out.success = True
    return out


def _stats(name: str, values_s: Sequence[float], pcts: Sequence[int]) -> dict[str, float]:
    if not values_s:
        return {f"{k}_{name}_ms": 0.0 for k in ("mean", "median", "std", *(f"p{p}" for p in pcts))}
    ms = np.asarray(values_s, dtype=float) * 1000.0
    out = {
        f"mean_{name}_ms": float(np.mean(ms)),
        f"median_{name}_ms": float(np.median(ms)),
        f"std_{name}_ms": float(np.std(ms)),
    }
    for p in pcts:
        out[f"p{p}_{name}_ms"] = float(np.percentile(ms, p))
    return out


def compute_metrics(outcomes: Sequence[RequestOutcome], duration: float) -> dict[str, Any]:
    """bench_serving's BenchmarkMetrics fields from the measured requests."""
    ok = [o for o in outcomes if o.success]
    total_in = sum(o.input_len for o in ok)
    total_out = sum(o.output_len for o in ok)
    tpots = [(o.latency - o.ttft) / (o.output_len - 1) for o in ok if o.output_len > 1]
    itls = [x for o in ok for x in o.itl]
    duration = max(duration, 1e-9)
    metrics: dict[str, Any] = {
        "completed": len(ok),
        "failed": len(outcomes) - len(ok),
        "duration": duration,
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(ok) / duration,
        "input_throughput": total_in / duration,
        "output_throughput": total_out / duration,
        "total_throughput": (total_in + total_out) / duration,
        "concurrency": sum(o.latency for o in ok) / duration,
        "max_output_tokens_per_s": _peak_tokens_per_s(ok),
        "max_concurrent_requests": _peak_in_flight(ok),
    }
    metrics.update(_stats("e2e_latency", [o.latency for o in ok], (90, 99)))
    metrics.update(_stats("ttft", [o.ttft for o in ok], (90, 99)))
    metrics.update(_stats("tpot", tpots, (90, 99)))
    metrics.update(_stats("itl", itls, (90, 95, 99)))
    metrics["max_itl_ms"] = max(itls) * 1000.0 if itls else 0.0
    errors = sorted({o.error for o in outcomes if not o.success})
    if errors:
        metrics["errors"] = errors[:5]
    return metrics


def _peak_tokens_per_s(ok: Sequence[RequestOutcome]) -> float:
    times = [(t, n) for o in ok for t, n in o.token_times]
    if not times:
        return 0.0
    t0 = min(o.start for o in ok)
    buckets: dict[int, int] = {}
    for t, n in times:
        key = int(t - t0)
        buckets[key] = buckets.get(key, 0) + n
    return float(max(buckets.values()))


def _peak_in_flight(ok: Sequence[RequestOutcome]) -> int:
    edges = sorted([(o.start, 1) for o in ok] + [(o.start + o.latency, -1) for o in ok])
    peak = current = 0
    for _, step in edges:
        current += step
        peak = max(peak, current)
    return peak


def open_client(target: Target) -> StreamingClient:
    """One keep-alive pool for warm-up and measurement: measured requests reuse warm
    connections, so 256 TCP connects do not land inside the measured window."""
    return StreamingClient(target.base_url)


async def run_requests(
    client: StreamingClient,
    target: Target,
    prompts: Sequence[list[int] | str],
    settings: BenchSettings,
    concurrency: int,
) -> tuple[list[RequestOutcome], float]:
    """All prompts, at most `concurrency` in flight; (outcomes, wall seconds)."""
    gate = asyncio.Semaphore(concurrency)

    async def limited(prompt: list[int] | str) -> RequestOutcome:
        async with gate:
            try:
                return await asyncio.wait_for(
                    one_request(client, target, prompt, settings), settings.request_timeout_s
                )
            except TimeoutError:
                return RequestOutcome(False, f"timed out after {settings.request_timeout_s} s")

    start = time.perf_counter()
    outcomes = await asyncio.gather(*(limited(p) for p in prompts))
    return list(outcomes), time.perf_counter() - start


def level_requests(settings: BenchSettings, concurrency: int) -> int:
    return max(8, settings.rounds * concurrency)


def run_level(
    target: Target,
    settings: BenchSettings,
    concurrency: int,
    num_prompts: int | None = None,
    *,
    pending: Callable[[], int | None] | None = None,
    check: Callable[[Sequence[RequestOutcome]], None] | None = None,
) -> dict[str, Any]:
    """Warm up with max(2, C) requests, then measure num_prompts requests at concurrency C.
    `pending`: a signal recorded before the level's loop took the signals (run_owned).
    `check`: judges the measured outcomes after the timed window, before any number is made
    of them (the re-count of their tokens, recount.py); it fails the ones it refuses."""
    count = num_prompts if num_prompts is not None else level_requests(settings, concurrency)

    async def both() -> tuple[list[RequestOutcome], float, list[RequestOutcome]]:
        # Made here, where a signal only cancels: a KeyboardInterrupt raised inside numpy's
        # lazy `numpy.random` import was swallowed, and the level then ran to its end.
        warm = make_prompts(settings, max(2, concurrency), stream=1_000_000 + concurrency)
        measured = make_prompts(settings, count, stream=concurrency)
        client = open_client(target)
        try:
            warm_out, _ = await run_requests(client, target, warm, settings, concurrency)
            outcomes, duration = await run_requests(client, target, measured, settings, concurrency)
        finally:
            client.abandon()
        return outcomes, duration, warm_out

    # The loop owns SIGTERM/SIGINT while it runs (owned_loop.py says why asyncio.run hung).
    outcomes, duration, warm_out = run_owned(both(), pending=pending)
    if check is not None:
        check(outcomes)
    return level_fields(outcomes, duration, concurrency, count, warm_out)


def level_fields(
    outcomes: Sequence[RequestOutcome],
    duration: float,
    concurrency: int,
    count: int,
    warm_out: Sequence[RequestOutcome],
) -> dict[str, Any]:
    """One level's fields: compute_metrics' and the level's own (its per-request samples,
    level, size and warm-up); serve/measures.py declares each."""
    metrics = compute_metrics(outcomes, duration)
    ok = [o for o in outcomes if o.success]
    metrics.update(
        {
            # Per-request samples (bench_serving --output-details keeps them too), for
            # distributions in reports; ITLs are left out (one per token: too many).
            "ttfts_ms": [round(o.ttft * 1000, 3) for o in ok],
            "e2e_latencies_ms": [round(o.latency * 1000, 3) for o in ok],
            "tpots_ms": [
                round((o.latency - o.ttft) / (o.output_len - 1) * 1000, 3)
                for o in ok
                if o.output_len > 1
            ],
            "max_concurrency": concurrency,
            "num_prompts": count,
            "warmup_requests": len(warm_out),
            "warmup_failed": sum(not o.success for o in warm_out),
        }
    )
    return metrics


def decode_tok_s(metrics: dict[str, Any]) -> float:
    """Single-stream decode speed: 1000 / median TPOT (prefill excluded)."""
    tpot = float(metrics.get("median_tpot_ms") or 0.0)
    return 1000.0 / tpot if tpot > 0 else 0.0


def bench_record(
    settings: BenchSettings, metrics: dict[str, Any], metadata: dict[str, Any], tag: str
) -> dict[str, Any]:
    """One JSONL line: bench_serving's keys, then our metadata."""
    record: dict[str, Any] = {
        "tag": tag,
        "backend": "openai-completions",
        "dataset_name": "random-ids" if settings.prompt_format == "token-ids" else "random-words",
        "request_rate": "inf",
        "random_input_len": settings.input_len,
        "random_output_len": settings.output_len,
        "random_range_ratio": 1.0,
        "seed": settings.seed,
    }
    record.update(metrics)
    record["metadata"] = metadata
    return record


def append_jsonl(path: Path, records: Sequence[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        for record in records:
            fh.write(redact(json.dumps(record, sort_keys=True, default=str)) + "\n")
