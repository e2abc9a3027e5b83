"""A synthetic OpenAI-compatible token server: a real process serving real HTTP on 127.0.0.1.

It stands for an inference engine where the engine cannot run (or where we need a known rate):
it streams tokens at exactly `--rate` tokens/s per request, `--tokens-per-chunk` tokens per SSE
event, and keeps server-side books (`GET /stats`) so a benchmark client can be checked against
the truth. Its log mimics SGLang 0.5.9's startup lines (weight-loading tqdm bar, ready line).

Scenarios (`--mode`): ok; oom (logs a CUDA OOM traceback, then lingers without exiting, as
SGLang does when a rank dies); exit (dies with code 1 during load); hang (logs a few lines,
then stays silent forever); `--lie` reports token counts the stream does not bear out and
`--raw-event` sends a malformed event (an engine whose numbers are claims); `--orphan` starts a helper in its own session that ignores SIGTERM
and outlives the server (SGLang's TP workers reparented to PID 1).

Stdlib only, so it runs under any Python. Not part of the product: tests and benchmarks use it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
import zlib

READY_LINE = "The server is fired up and ready to roll!"


class Books:
    def __init__(self) -> None:
        self.tokens = 0
        self.requests = 0
        self.first_accept: float | None = None
        self.last_send = 0.0


class Histograms:
    """Sums and counts of SGLang's Prometheus histograms (`--enable-metrics`): TTFT and time
    per output token, never reset (a scraper takes differences)."""

    def __init__(self) -> None:
        self.ttft_sum = self.ttft_count = 0.0
        self.tpot_sum = self.tpot_count = 0.0

    def text(self, model: str) -> bytes:
        label = f'{{model_name="{model}"}}'
        lines = [f"sglang:time_to_first_token_seconds_sum{label} {self.ttft_sum}",
                 f"sglang:time_to_first_token_seconds_count{label} {self.ttft_count}",
                 f"sglang:time_per_output_token_seconds_sum{label} {self.tpot_sum}",
                 f"sglang:time_per_output_token_seconds_count{label} {self.tpot_count}"]  # fmt: skip
        return ("\n".join(lines) + "\n").encode()


def log(msg: str, end: str = "\n") -> None:
    """To stdout; a reader that went away (tests close the pipe once the server is ready)
    does not stop the serving."""
    try:
        sys.stdout.write(msg + end)
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        pass


def deterministic_text(prompt: str, n: int, garble: bool) -> str:
    """Greedy stand-in: the same prompt gives the same text; arithmetic is answered right."""
    m = re.search(r"(\d+) ([+*]) (\d+) =\s*$", prompt)
    if m:
        a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
        value = a + b if op == "+" else a * b
        return f" {value + 1 if garble else value}\n"
    seed = zlib.crc32(prompt.encode()) ^ (0x5A5A if garble else 0)
    words = []
    for i in range(n):
        seed = (seed * 1103515245 + 12345 + i) & 0x7FFFFFFF
        words.append(f"w{seed % 97}")
    return " " + " ".join(words)


async def read_request(reader: asyncio.StreamReader) -> tuple[str, str, bytes] | None:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    length = 0
    for line in lines[1:]:
        if line.lower().startswith("content-length:"):
            length = int(line.split(":", 1)[1])
    body = await reader.readexactly(length) if length else b""
    return method, path, body


def response(status: str, payload: bytes, ctype: str = "application/json") -> bytes:
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {len(payload)}\r\n"
        "connection: keep-alive\r\n\r\n"
    ).encode() + payload


class Prefill:
    """--compile-stall-s: streamed requests arriving within WINDOW_S of each other form one
    prefill batch; the first batch of each size waits the stall before its first token (a
    stand-in for an engine's JIT compiling a kernel for a token count it has not met)."""

    WINDOW_S = 0.1  # a burst sent together arrives within it, also on a loaded machine

    def __init__(self, stall_s: float) -> None:
        self.stall_s = stall_s
        self.seen: set[int] = set()
        self.stalled: list[int] = []
        self.batch: list[int] = []
        self.done: asyncio.Future | None = None

    async def join(self) -> None:
        if self.stall_s <= 0:
            return
        if self.done is None:
            self.batch, self.done = [], asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_later(self.WINDOW_S, self._close, self.batch, self.done)
        self.batch.append(1)
        await asyncio.shield(self.done)

    def _close(self, batch: list[int], done: asyncio.Future) -> None:
        self.done = None
        size = len(batch)
        if size in self.seen:
            done.set_result(None)
            return
        self.seen.add(size)
        self.stalled.append(size)
        asyncio.get_running_loop().call_later(self.stall_s, done.set_result, None)
        log(f"compiling for a prefill batch of {size}")


class Server:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.ready = False
        self.books = Books()
        self.histograms = Histograms()
        self.served = 0
        self.prefill = Prefill(args.compile_stall_s)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    req = await read_request(reader)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                if req is None:
                    return
                method, path, body = req
                if path in ("/health", "/health_generate"):
                    code = "200 OK" if self.ready else "503 Service Unavailable"
                    writer.write(response(code, b""))
                elif path in ("/stats/reset", "/flush_cache"):
                    # /flush_cache: what SGLang's bench_serving --flush-cache posts between its
                    # warm-up and its measured run (benchmarks/serve/serve_harness_accuracy.py).
                    self.books = Books()
                    writer.write(response("200 OK", b"{}"))
                elif path == "/stats":
                    b = self.books
                    stats = {"tokens": b.tokens, "requests": b.requests,
                             "first_accept": b.first_accept, "last_send": b.last_send,
                             "compile_stalls": self.prefill.stalled}
                    writer.write(response("200 OK", json.dumps(stats).encode()))
                elif path == "/metrics":
                    metrics = self.histograms.text(self.args.model)
                    writer.write(response("200 OK", metrics, "text/plain"))
                elif path == "/v1/models":
                    data = {"object": "list", "data": [{"id": self.args.model, "object": "model"}]}
                    writer.write(response("200 OK", json.dumps(data).encode()))
                elif path == "/v1/completions" and method == "POST":
                    await self.complete(json.loads(body), writer)
                else:
                    writer.write(response("404 Not Found", b'{"detail":"not found"}'))
                await writer.drain()
        finally:
            writer.close()

    async def complete(self, req: dict, writer: asyncio.StreamWriter) -> None:
        if not self.ready:
            writer.write(response("503 Service Unavailable", b""))
            return
        if req.get("model") != self.args.model:
            writer.write(response("404 Not Found", b'{"detail":"unknown model"}'))
            return
        now = time.monotonic()
        books = self.books
        books.requests += 1
        self.served += 1
        if self.args.oom_after and self.served == self.args.oom_after:
            log("[TP1] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.")
        if books.first_accept is None:
            books.first_accept = now
        prompt = req.get("prompt", "")
        n_in = len(prompt) if isinstance(prompt, list) else len(str(prompt).split())
        max_tokens = int(req.get("max_tokens", 16))
        if not req.get("stream"):
            text = deterministic_text(str(prompt), max_tokens, self.args.garble)
            out = {"object": "text_completion", "model": self.args.model,
                   "choices": [{"index": 0, "text": text, "finish_reason": "length"}],
                   "usage": {"prompt_tokens": n_in, "completion_tokens": max_tokens}}
            books.tokens += max_tokens
            books.last_send = time.monotonic()
            writer.write(response("200 OK", json.dumps(out).encode()))
            return
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\nconnection: keep-alive\r\n\r\n"
        )
        await self.prefill.join()
        k = self.args.tokens_per_chunk
        interval = k / (self.args.rate * (1 - self.slowdown()))
        sent = 0
        start = time.monotonic()  # after a prefill stall, if any
        i = 0
        lie = self.args.lie
        # few-chunks: stream half the tokens (a faster, cheaper server), claim them all;
        # chunks-xF / empty-x10: stream 1/F of the tokens, every chunk's count F times its
        # tokens (the per-chunk counts agree with the final claim: only the text shows it)
        factor = {"chunks-x10": 10, "chunks-x2": 2, "chunks-x1.5": 1.5, "empty-x10": 10}.get(lie)
        goal = max_tokens // 2 if lie == "few-chunks" else max_tokens
        if factor:
            goal = max(1, int(max_tokens / factor))
        while sent < goal:
            i += 1
            await asyncio.sleep(max(0.0, start + i * interval - time.monotonic()))
            step = min(k, goal - sent)
            sent += step
            claim: object = self.claimed(sent) if lie in ("all-x10", "huge", "negative",
                                                          "string", "down", "nan") else sent
            if lie == "down" and sent >= 2 * k:
                claim = sent - 2 * k  # goes backwards
            if factor:
                claim = min(max_tokens, int(sent * factor))
            if lie == "under":
                claim = i  # one token per chunk claimed, k streamed in each
            text = "" if lie == "empty-x10" else " t" * step
            chunk = {"object": "text_completion", "choices": [{"index": 0, "text": text,
                     "finish_reason": None}],
                     "usage": {"prompt_tokens": n_in, "completion_tokens": claim}}
            if lie == "no-usage":
                del chunk["usage"]
            data = b"data: " + json.dumps(chunk).encode() + b"\n\n"
            if self.args.raw_event and sent == step:
                data = b"data: " + self.args.raw_event.encode() + b"\n\n" + data
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            books.tokens += step
            books.last_send = time.monotonic()
            if sent == step:
                self.histograms.ttft_sum += books.last_send - now
                self.histograms.ttft_count += 1
            else:
                self.histograms.tpot_sum += interval
                self.histograms.tpot_count += step
            await writer.drain()
        if lie in ("final-x10", "few-chunks"):
            # A usage-only final chunk (as vLLM sends with include_usage) that lies.
            final = {"object": "text_completion", "choices": [],
                     "usage": {"prompt_tokens": n_in,
                               "completion_tokens": self.claimed(sent, max_tokens)}}
            data = b"data: " + json.dumps(final).encode() + b"\n\n"
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
        tail = b""
        if not self.args.no_done:
            tail = b"data: [DONE]\n\n"
        if tail:
            writer.write(b"%x\r\n%s\r\n" % (len(tail), tail))
        writer.write(b"0\r\n\r\n")

    def slowdown(self) -> float:
        """--rate-file: a fraction x read at each request; the stream runs at rate x (1 - x)
        (the stand-in of the regression dial, benchmarks/gate/regression_dial.py). Each
        request's fraction is logged."""
        if not self.args.rate_file:
            return 0.0
        try:
            with open(self.args.rate_file, encoding="utf-8") as f:
                x = float(f.read().strip() or 0)
        except (OSError, ValueError):
            x = 0.0
        log(f"request served at slowdown {x}")
        return x

    def claimed(self, sent: int, max_tokens: int = 0) -> object:
        """What a lying server (--lie) reports as completion_tokens after `sent` tokens."""
        lie = self.args.lie
        if lie in ("final-x10", "all-x10"):
            return sent * 10
        if lie == "huge":
            return 10**30
        if lie == "negative":
            return -sent
        if lie == "string":
            return str(sent)
        if lie == "nan":
            return float("nan")  # json.dumps writes NaN, which Python's json reads back
        if lie == "few-chunks":
            return max_tokens  # within max_tokens, above what the chunks counted
        return sent

    async def startup(self) -> None:
        mode = self.args.mode
        log("Init torch distributed begin.")
        log("Load weight begin. avail mem=79.10 GB")
        shards = self.args.shards
        for i in range(shards + 1):
            pct = int(100 * i / shards)
            log(f"Loading safetensors checkpoint shards: {pct:3d}% Completed | {i}/{shards} "
                "[00:00<00:00, 9.99it/s]", end="\r" if i < shards else "\n")
            await asyncio.sleep(self.args.load_s / shards)
            if mode == "exit" and i == shards // 2:
                log("Traceback (most recent call last):")
                log("RuntimeError: synthetic load failure")
                os._exit(1)
            if mode == "hang" and i == shards // 2:
                await asyncio.Event().wait()  # silent forever
        if mode == "oom":
            log("Traceback (most recent call last):")
            log("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
            await asyncio.Event().wait()  # lingers, as a half-dead SGLang does
        log("Load weight end. elapsed=0.10 s, type=Synthetic, dtype=torch.bfloat16")
        log("KV Cache is allocated. #tokens: 100000, KV size: 1.00 GB")
        log("Capture cuda graph begin. This can take up to several minutes. avail mem=9.00 GB")
        log("Capture cuda graph end. Time elapsed: 0.01 s. mem usage=0.10 GB. avail mem=8.9 GB.")
        log(f"Uvicorn running on http://{self.args.host}:{self.args.port} (Press CTRL+C to quit)")
        self.ready = True
        log(READY_LINE)


def spawn_orphan() -> None:
    """A helper in its own session that ignores SIGTERM and outlives us."""
    code = (
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "while True: time.sleep(1)\n"
    )
    subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


def plugin_factor() -> float:
    """The product of the installed packages' rate factors (0.5: half the tokens/s). An entry
    point that fails to load fails the server's start, as a broken import fails an engine's."""
    from importlib.metadata import entry_points

    factor = 1.0
    for ep in sorted(entry_points(group="synthetic_server.rate"), key=lambda e: e.name):
        value = float(ep.load()())
        log(f"rate plugin {ep.name}: x{value}")
        factor *= value
    return factor


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", default="synthetic")
    parser.add_argument("--rate", type=float, default=1000.0, help="tokens/s per stream")
    parser.add_argument("--tokens-per-chunk", type=int, default=1)
    parser.add_argument("--mode", choices=["ok", "oom", "exit", "hang"], default="ok")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--load-s", type=float, default=0.4)
    parser.add_argument("--no-done", action="store_true", help="end streams without [DONE]")
    parser.add_argument("--garble", action="store_true", help="answer differently (broken stack)")
    parser.add_argument("--orphan", action="store_true")
    parser.add_argument("--compile-stall-s", type=float, default=0.0,
                        help="the first prefill batch of each size waits this long (a JIT)")
    parser.add_argument("--rate-file", default="", help="a slowdown fraction read per request")
    parser.add_argument(
        "--lie", choices=["none", "final-x10", "all-x10", "huge", "negative", "string", "down",
                          "few-chunks", "chunks-x10", "chunks-x2", "chunks-x1.5", "empty-x10",
                          "under", "nan", "no-usage"], default="none",
        help="report usage.completion_tokens that the stream does not bear out")
    parser.add_argument("--raw-event", default="",
                        help="send this as a `data:` event before the first token")
    parser.add_argument("--oom-after", type=int, default=0,
                        help="log a CUDA OOM after this many requests, and keep serving")
    parser.add_argument("--rate-plugins", action="store_true",
                        help="multiply --rate by every installed 'synthetic_server.rate' entry "
                        "point's factor() (packages of the env change the server's speed)")
    args = parser.parse_args()
    if args.rate_plugins:
        args.rate *= plugin_factor()
    if args.orphan:
        spawn_orphan()
    server = Server(args)
    srv = await asyncio.start_server(server.handle, args.host, args.port, backlog=1024)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    startup = asyncio.create_task(server.startup())
    await stop.wait()
    startup.cancel()
    srv.close()
    log("shutting down")


if __name__ == "__main__":
    asyncio.run(main())
