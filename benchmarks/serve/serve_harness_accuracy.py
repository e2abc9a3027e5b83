"""Is the serve-bench client the bottleneck? Measure it against a token source of known rate.

The synthetic server (tests/serve/synthetic_server.py, a separate process) streams every
request at exactly RATE tokens/s, K tokens per SSE event, and keeps its own books: tokens sent
and the span from the first accepted request to the last byte written. The client's
`output_throughput` is compared with that server-side truth, its ITL and TPOT with the
schedule's exact values. Error = |measured - truth| / truth. The issue asks for <= 1% at
>= 20,000 tok/s with C = 256 streams.

    .venv/bin/python benchmarks/serve/serve_harness_accuracy.py [--out benchmarks/serve/results/NAME.json]
        [--bench-serving PYTHON] [--case C,RATE,K,OUT,ROUNDS]

Prints one table; writes the same numbers as JSON. Each case: warm-up of max(2, C) requests,
server books reset, then C x ROUNDS measured requests at concurrency C.

--bench-serving PYTHON also runs SGLang's own client, `python -m sglang.bench_serving` from
the pinned sglang 0.5.9 wheel, with that interpreter (a throwaway venv holding the wheel
without dependencies plus the light ones its import needs: aiohttp numpy pybase64 requests
datasets pillow tqdm transformers ipython), against a fresh synthetic server at the same
settings: backend `vllm` (OpenAI /v1/completions, streamed), `random-ids` prompts of 16
tokens from a tiny local tokenizer, ignore_eos, the same warm-up count, and `--flush-cache`,
which the synthetic server takes as "reset the books" (so both are judged on the measured
run only). Each client's error is against the server's own books.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from stackgate.manifest import BenchSettings  # noqa: E402
from validators.serve import bench_client  # noqa: E402

SERVER = ROOT / "tests" / "serve" / "synthetic_server.py"

# (name, concurrency, tokens/s per stream, tokens per event, output_len, rounds)
CASES = [
    ("single-stream 100 tok/s, 1 tok/event", 1, 100.0, 1, 256, 4),
    ("C=256 x 100 tok/s, 16 tok/event", 256, 100.0, 16, 512, 1),
    ("C=256 x 100 tok/s, 4 tok/event", 256, 100.0, 4, 512, 1),
    ("C=256 x 100 tok/s, 1 tok/event", 256, 100.0, 1, 512, 1),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(rate: float, k: int) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--port", str(port), "--rate", str(rate),
         "--tokens-per-chunk", str(k), "--load-s", "0"],
        stdout=subprocess.DEVNULL, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            if httpx.get(f"{url}/health").status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError("synthetic server did not start")


def run_case(name: str, conc: int, rate: float, k: int, out_len: int, rounds: int) -> dict[str, object]:
    proc, url = _start(rate, k)
    try:
        settings = BenchSettings(input_len=16, output_len=out_len, concurrencies=[conc],
                                 rounds=rounds, ignore_eos=True)
        target = bench_client.Target(url, "synthetic")
        warm = bench_client.make_prompts(settings, max(2, conc), stream=1)
        measured = bench_client.make_prompts(settings, max(conc * rounds, 1), stream=2)

        async def go() -> tuple[list[bench_client.RequestOutcome], float]:
            client = bench_client.open_client(target)
            try:
                await bench_client.run_requests(client, target, warm, settings, conc)
                httpx.get(f"{url}/stats/reset")
                return await bench_client.run_requests(client, target, measured, settings, conc)
            finally:
                client.abandon()

        outcomes, duration = asyncio.run(go())
        books = httpx.get(f"{url}/stats").json()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
    m = bench_client.compute_metrics(outcomes, duration)
    truth_tput = books["tokens"] / (books["last_send"] - books["first_accept"])
    itl_truth_ms = 1000.0 / rate  # the schedule emits k tokens every k/rate s
    tpot_truth_ms = 1000.0 / rate * (out_len - k) / (out_len - 1)
    return {
        "case": name,
        "concurrency": conc,
        "tokens_per_event": k,
        "nominal_tok_s": conc * rate,
        "server_truth_tok_s": truth_tput,
        "output_throughput": m["output_throughput"],
        "throughput_error": abs(m["output_throughput"] - truth_tput) / truth_tput,
        "throughput_signed_error": (m["output_throughput"] - truth_tput) / truth_tput,
        "server_vs_nominal": truth_tput / (conc * rate),
        "mean_ttft_ms": m["mean_ttft_ms"],
        "ttft_truth_ms": 1000.0 * k / rate,  # the first event carries k tokens
        "median_itl_ms": m["median_itl_ms"],
        "itl_error": abs(m["median_itl_ms"] - itl_truth_ms) / itl_truth_ms,
        "mean_tpot_ms": m["mean_tpot_ms"],
        "tpot_error": abs(m["mean_tpot_ms"] - tpot_truth_ms) / tpot_truth_ms,
        "completed": m["completed"],
        "failed": m["failed"],
    }


_TOKENIZER = """
import json, sys
from pathlib import Path
from tokenizers import Tokenizer, models, pre_tokenizers
folder = Path(sys.argv[1])
folder.mkdir(parents=True, exist_ok=True)
vocab = {"[UNK]": 0, **{f"w{i}": i + 1 for i in range(999)}}
tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tok.save(str(folder / "tokenizer.json"))
config = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]"}
(folder / "tokenizer_config.json").write_text(json.dumps(config))
"""


def _tiny_tokenizer(python: str, folder: Path) -> Path:
    """A word-level tokenizer of 1,000 words made on the spot with the bench venv's
    `tokenizers` (bench_serving needs one to make prompts; the synthetic server ignores the
    prompt's content)."""
    if not (folder / "tokenizer.json").is_file():
        subprocess.run([python, "-c", _TOKENIZER, str(folder)], check=True, timeout=300)
    return folder


def run_bench_serving_case(
    python: str, name: str, conc: int, rate: float, k: int, out_len: int, rounds: int
) -> dict[str, object]:
    tokenizer = _tiny_tokenizer(
        python, Path.home() / ".cache" / "stackgate" / "bench-serving-tokenizer"
    )
    proc, url = _start(rate, k)
    out_file = Path(f"/tmp/bench-serving-{os.getpid()}-{conc}-{k}.jsonl")
    out_file.unlink(missing_ok=True)
    try:
        done = subprocess.run(
            [python, "-m", "sglang.bench_serving", "--backend", "vllm", "--base-url", url,
             "--model", "synthetic", "--tokenizer", str(tokenizer),
             "--dataset-name", "random-ids", "--random-input-len", "16",
             "--random-output-len", str(out_len), "--random-range-ratio", "1",
             "--num-prompts", str(max(conc * rounds, 1)), "--max-concurrency", str(conc),
             "--request-rate", "inf", "--warmup-requests", str(max(2, conc)), "--flush-cache",
             "--disable-tqdm", "--output-file", str(out_file)],
            capture_output=True, text=True, timeout=1800, check=False,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"bench_serving exit {done.returncode}:\n{done.stderr[-3000:]}")
        books = httpx.get(f"{url}/stats").json()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
    m = json.loads(out_file.read_text().splitlines()[-1])
    out_file.unlink()
    truth_tput = books["tokens"] / (books["last_send"] - books["first_accept"])
    itl_truth_ms = 1000.0 / rate
    tpot_truth_ms = 1000.0 / rate * (out_len - k) / (out_len - 1)
    return {
        "case": name, "client": "sglang.bench_serving 0.5.9", "concurrency": conc,
        "tokens_per_event": k, "nominal_tok_s": conc * rate, "server_truth_tok_s": truth_tput,
        "output_throughput": m["output_throughput"],
        "throughput_error": abs(m["output_throughput"] - truth_tput) / truth_tput,
        "throughput_signed_error": (m["output_throughput"] - truth_tput) / truth_tput,
        "server_vs_nominal": truth_tput / (conc * rate),
        "mean_ttft_ms": m["mean_ttft_ms"], "ttft_truth_ms": 1000.0 * k / rate,
        # bench_serving's ITL is the gap between SSE events (k tokens each), not per token.
        "median_itl_ms": m["median_itl_ms"],
        "itl_error": abs(m["median_itl_ms"] - itl_truth_ms) / itl_truth_ms,
        "mean_tpot_ms": m["mean_tpot_ms"],
        "tpot_error": abs(m["mean_tpot_ms"] - tpot_truth_ms) / tpot_truth_ms,
        "completed": m["completed"], "failed": max(conc * rounds, 1) - int(m["completed"]),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--cases", default="all", help="comma-separated case numbers (0-based)")
    parser.add_argument("--case", action="append", default=[],
                        help="C,RATE,K,OUT,ROUNDS: a case of your own (repeatable)")  # fmt: skip
    parser.add_argument("--bench-serving", metavar="PYTHON", default=None,
                        help="an interpreter with sglang 0.5.9 (no deps) + light deps")  # fmt: skip
    args = parser.parse_args()
    picked = list(CASES) if args.cases == "all" else [CASES[int(i)] for i in args.cases.split(",")]
    if args.case and args.cases == "all":
        picked = []  # only the cases given
    for spec in args.case:
        c, r, k, o, n = spec.split(",")
        picked.append((f"C={c} x {r} tok/s, {k} tok/event", int(c), float(r), int(k), int(o), int(n)))
    rows = []
    for case in picked:
        rows.append({**run_case(*case), "client": "stackgate"})
        if args.bench_serving:
            rows.append(run_bench_serving_case(args.bench_serving, *case))
    head = f"{'case':40} {'client':27} {'truth tok/s':>12} {'measured':>10} {'tput err':>9} {'ITL err':>8} {'TPOT err':>9} {'srv/nominal':>11} {'TTFT ms':>8}"
    print(head)
    for r in rows:
        print(f"{r['case']:40} {r['client']:27} {r['server_truth_tok_s']:12.0f} {r['output_throughput']:10.0f} "
              f"{r['throughput_error']:9.3%} {r['itl_error']:8.2%} {r['tpot_error']:9.2%} "
              f"{r['server_vs_nominal']:11.3f} {r['mean_ttft_ms']:8.1f}")
    if args.out:
        meta = {"host": platform.node(), "cpus": len(os.sched_getaffinity(0)),
                "load_average_at_end": os.getloadavg(),
                "python": platform.python_version(), "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
