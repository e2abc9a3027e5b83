"""serve-bench end to end on a real CPU inference engine (`transformers serve`) and a tiny
random-weight Llama made here: launch -> progress -> ready -> correctness -> benchmark ->
teardown, then a broken model (crash) and a different model (fluent garbage).

Speeds are never asserted (they vary 5-9x on these machines); verdicts and leftovers are.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import assert_tracked_gone, write_stack
from .engine_env import transformers_serve_env

pytestmark = [pytest.mark.slow, pytest.mark.network, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
MAKE_MODEL = Path(__file__).with_name("make_tiny_model.py")


@pytest.fixture(scope="module")
def engine() -> Path:
    return transformers_serve_env()


@pytest.fixture(scope="module")
def models(engine: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    out = {}
    for name, seed in (("good", "0"), ("other", "1")):
        out[name] = root / name
        subprocess.run([str(engine / "bin" / "python"), str(MAKE_MODEL), str(out[name]),
                        "--seed", seed], check=True, capture_output=True)
    broken = root / "broken"
    broken.mkdir()
    for item in out["good"].iterdir():
        (broken / item.name).write_bytes(item.read_bytes())
    (broken / "model.safetensors").write_bytes(b"not a safetensors file")
    out["broken"] = broken
    return out


def _stack(folder: Path, model: Path) -> Path:
    profile = {
        "engine": "openai-command",
        "model_path": str(model),
        "command": ["{python}", "-m", "transformers.cli.transformers", "serve", "--host", "{host}",
                    "--port", "{port}", "--device", "cpu", "--log-level", "info", "{model_path}"],
        "env": {"HF_HUB_OFFLINE": "1"},
        "load_timeout_s": 600, "hang_timeout_s": 300, "stop_grace_s": 10,
        "bench": {"input_len": 32, "output_len": 16, "concurrencies": [1, 4], "rounds": 1,
                  "single_stream_requests": 3, "prompt_format": "text", "ignore_eos": False},
    }
    folder.mkdir(parents=True, exist_ok=True)
    return write_stack(folder, "tfserve", {"main": profile})


def _serve_bench(stack: Path, env: Path, out: Path, *extra: str) -> tuple[int, dict[str, dict]]:
    proc = subprocess.run(
        [sys.executable, "-m", "validators", "serve-bench", str(stack), "--env", str(env),
         "--out-dir", str(out), "--json", *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=800,
    )
    payload = json.loads(proc.stdout)
    checks = {r["check"].removeprefix("serve-bench."): r for r in payload["results"]}
    return proc.returncode, checks


def _assert_all_gone(checks: dict[str, dict]) -> None:
    assert checks["teardown"]["status"] == "PASS", checks["teardown"]["reason"]
    assert_tracked_gone(checks["teardown"]["evidence"]["tracked"])


def test_real_engine_end_to_end(engine: Path, models: dict[str, Path], tmp_path: Path) -> None:
    stack = _stack(tmp_path / "stacks", models["good"])
    ref = tmp_path / "reference.json"
    code, checks = _serve_bench(stack, engine, tmp_path / "known-good", "--record-reference", str(ref))
    assert code == 0, checks
    assert ref.is_file()

    code, checks = _serve_bench(stack, engine, tmp_path / "candidate", "--reference", str(ref))
    assert code == 0, {k: v["reason"] for k, v in checks.items()}
    assert [c for c, r in checks.items() if r["status"] != "PASS"] == []
    ready = checks["ready"]["evidence"]
    assert "load weights" in ready["phases"] and ready["weights_progress"].startswith("20/")
    assert checks["correctness.greedy"]["evidence"]["exact_match"] == 1.0
    records = [json.loads(x) for x in (tmp_path / "candidate" / "serve-bench.jsonl").read_text().splitlines()]
    assert [r["tag"] for r in records] == ["single-stream", "sweep-c1", "sweep-c4"]
    for r in records:
        assert r["failed"] == 0 and r["total_output_tokens"] == 16 * r["completed"]
        assert r["metadata"]["versions"]["transformers"]
    _assert_all_gone(checks)

    # A different model behind the same stack: fluent, well-formed, and wrong.
    other = _stack(tmp_path / "stacks-other", models["other"])
    code, checks = _serve_bench(other, engine, tmp_path / "other", "--reference", str(ref),
                                "--concurrency", "1")
    assert code == 1
    assert checks["correctness.greedy"]["status"] == "FAIL"
    assert checks["sweep"]["status"] == "PASS"
    _assert_all_gone(checks)


def test_real_engine_with_broken_weights_crashes(engine: Path, models: dict[str, Path],
                                                 tmp_path: Path) -> None:
    stack = _stack(tmp_path / "stacks", models["broken"])
    code, checks = _serve_bench(stack, engine, tmp_path / "out")
    assert code == 1
    ready = checks["ready"]
    assert ready["status"] == "FAIL" and ready["evidence"]["verdict"] == "crashed"
    assert ready["evidence"]["last_log_lines"]
    assert checks["sweep"]["status"] == "SKIP"
    _assert_all_gone(checks)
