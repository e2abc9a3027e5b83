"""The benchmark client: SSE parsing on SGLang payload shapes, bench_serving's metric
formulas, and the HTTP transport against real servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from stackgate.manifest import BenchSettings
from validators.serve import bench_client
from validators.serve.bench_client import RequestOutcome, SseParser, compute_metrics
from validators.serve.sse_transport import StreamingClient

from .conftest import synthetic_server

FIXTURES = Path(__file__).with_name("fixtures")


def test_sglang_stream_with_continuous_usage() -> None:
    raw = (FIXTURES / "sglang-0.5.9-completions-stream.sse").read_bytes()
    parser = SseParser()
    counts = [parser.feed(raw[i:i + 50]) for i in range(0, len(raw), 50)]
    assert sum(counts) == 5 and parser.done
    assert parser.output_tokens == 5 and parser.prompt_tokens == 7


def test_sglang_mid_stream_error_is_an_error() -> None:
    parser = SseParser()
    parser.feed((FIXTURES / "sglang-0.5.9-stream-error.sse").read_bytes())
    assert "illegal memory access" in parser.error


def test_stream_without_done_and_usage_only_at_the_end() -> None:
    """transformers serve: one event per text piece, usage in the last chunk, no [DONE]."""
    events = [{"choices": [{"text": f" w{i}"}]} for i in range(3)]
    events.append({"choices": [{"text": "", "finish_reason": "length"}],
                   "usage": {"prompt_tokens": 9, "completion_tokens": 4}})
    parser = SseParser()
    got = [parser.feed(f"data: {json.dumps(e)}\r\n\r\n".encode()) for e in events]
    assert got == [1, 1, 1, 1]  # the 4th token was in a piece we saw as text only at the end
    assert parser.output_tokens == 4 and not parser.done and not parser.error


def test_metrics_follow_bench_serving_formulas() -> None:
    a = RequestOutcome(True, input_len=10, output_len=5, ttft=0.1, latency=0.5,
                       itl=[0.1] * 4, start=0.0, token_times=[(0.1, 1), (0.5, 4)])
    b = RequestOutcome(True, input_len=10, output_len=3, ttft=0.2, latency=0.4,
                       itl=[0.1, 0.1], start=0.1, token_times=[(0.3, 1), (0.5, 2)])
    bad = RequestOutcome(False, error="HTTP 500: boom")
    m = compute_metrics([a, b, bad], duration=2.0)
    assert m["completed"] == 2 and m["failed"] == 1 and m["errors"] == ["HTTP 500: boom"]
    assert m["total_output_tokens"] == 8 and m["output_throughput"] == 4.0
    assert m["total_input_tokens"] == 20 and m["total_throughput"] == 14.0
    assert m["mean_tpot_ms"] == pytest.approx(((0.5 - 0.1) / 4 + (0.4 - 0.2) / 2) / 2 * 1000)
    assert m["median_ttft_ms"] == pytest.approx(150.0)
    assert m["mean_itl_ms"] == pytest.approx(100.0)
    assert m["max_concurrent_requests"] == 2
    assert m["concurrency"] == pytest.approx(0.45)
    assert {"p90_ttft_ms", "p99_ttft_ms", "p95_itl_ms", "p99_e2e_latency_ms", "std_tpot_ms"} <= m.keys()


def test_prompts_are_fixed_length_and_seeded() -> None:
    s = BenchSettings(input_len=12, token_id_range=[100, 200], seed=7)
    one, two = bench_client.make_prompts(s, 3, stream=1), bench_client.make_prompts(s, 3, stream=1)
    assert one == two and all(len(p) == 12 for p in one)
    assert all(100 <= t < 200 for p in one for t in p)
    assert bench_client.make_prompts(s, 3, stream=2) != one
    words = bench_client.make_prompts(s.model_copy(update={"prompt_format": "text"}), 2, stream=1)
    assert all(isinstance(w, str) and len(w.split()) == 12 for w in words)


@pytest.fixture
def synthetic_url() -> Iterator[str]:
    with synthetic_server("--rate", "2000", "--tokens-per-chunk", "3", "--no-done") as url:
        yield url


def test_level_against_a_real_server(synthetic_url: str) -> None:
    settings = BenchSettings(input_len=8, output_len=10, rounds=1)
    m = bench_client.run_level(bench_client.Target(synthetic_url, "synthetic"), settings, 4)
    assert m["completed"] == 8 and m["failed"] == 0 and m["warmup_requests"] == 4
    assert m["total_output_tokens"] == 80 and m["total_input_tokens"] == 64


def test_http_errors_are_reported_per_request(synthetic_url: str) -> None:
    settings = BenchSettings(input_len=8, output_len=4, rounds=1)
    m = bench_client.run_level(bench_client.Target(synthetic_url, "wrong-model"), settings, 2)
    assert m["completed"] == 0 and m["failed"] == 8
    assert m["errors"] == ['HTTP 404: {"detail":"unknown model"}']


class _CloseDelimited(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for i in range(1, 4):
            chunk = {"choices": [{"text": "x"}], "usage": {"completion_tokens": i}}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()

    def log_message(self, *args: object) -> None:
        pass


def test_transport_reads_a_body_delimited_by_close() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _CloseDelimited)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        parser = SseParser()

        async def go() -> tuple[int, bytes]:
            client = StreamingClient(f"http://127.0.0.1:{server.server_address[1]}")
            try:
                return await client.post_stream("/v1/completions", {"x": 1}, parser.feed)
            finally:
                client.abandon()

        status, _ = asyncio.run(go())
        assert status == 200 and parser.output_tokens == 3
    finally:
        server.shutdown()
        server.server_close()
