"""serve-bench end to end against real server processes (the synthetic token server).

Each scenario ends in its verdict and leaves no process behind. Crash and hang verdicts must
come long before the profile's 600 s load timeout: the pytest timeout (far below it) fails a
run that waited for the timeout instead of reading the log.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import psutil
import pytest

from validators.serve.group import run_group

from .conftest import assert_no_leftovers, by_check, synthetic_command

pytestmark = pytest.mark.timeout(120)


def test_healthy_server_passes_every_check_and_leaves_nothing(make_ctx, tmp_path: Path) -> None:
    ref = tmp_path / "ref.json"
    recorded = by_check(run_group(make_ctx(options={"record_reference": str(ref)})))
    assert recorded["correctness.greedy"].status == "PASS"
    results = run_group(make_ctx(options={"reference": str(ref)}))
    checks = by_check(results)
    assert {c: r.status for c, r in checks.items()} == {
        "launch": "PASS", "ready": "PASS", "correctness.greedy": "PASS",
        "correctness.arithmetic": "PASS", "single_stream": "PASS", "sweep": "PASS",
        "token_counts": "SKIP", "serving": "PASS", "teardown": "PASS",
    }
    # stackgate's own python (no env given) holds no tokenizer: said so, never believed silently
    why = checks["token_counts"].reason
    assert "not re-counted: no tokenizer for 'synthetic'" in why, why
    assert "neither transformers nor tokenizers" in why, why
    assert checks["ready"].evidence["weights_progress"] == "4/4"
    assert "load weights" in checks["ready"].evidence["phases"]
    assert checks["correctness.greedy"].evidence["exact_match"] == 1.0
    records = [json.loads(line) for line in (tmp_path / "bench.jsonl").read_text().splitlines()]
    records = records[3:]  # the recording run appended its own three first
    assert [r["tag"] for r in records] == ["single-stream", "sweep-c1", "sweep-c4"]
    for r in records:
        assert r["completed"] == r["num_prompts"] and r["total_output_tokens"] == 16 * r["completed"]
        assert {"output_throughput", "mean_ttft_ms", "median_itl_ms", "mean_tpot_ms",
                "p99_e2e_latency_ms", "p90_ttft_ms"} <= r.keys()
        assert r["metadata"]["stack"] == "synthetic" and r["metadata"]["profile"] == "main"
    assert_no_leftovers(results)

    # The records side reads the sweep's and single-stream's typed measurements.
    from validators.core.results import Report
    from validators.records.extract import run_metrics

    assert checks["sweep"].measurements and checks["single_stream"].measurements
    assert all("ttfts_ms" not in level for level in checks["sweep"].evidence["levels"])
    run = run_metrics(Report(stack="synthetic", started_at="2026-01-01T00:00:00+00:00", results=results))
    assert run.invalid == []
    assert "serve-bench.sweep/output_throughput@c4" in run.metrics
    assert "serve-bench.single_stream/single_stream_decode_tok_s" in run.metrics
    assert len(run.distributions["serve-bench.sweep/ttft_ms@c4"]) == records[2]["completed"]


def test_garbled_output_fails_correctness_against_known_good(make_ctx, tmp_path: Path) -> None:
    ref = tmp_path / "ref.json"
    run_group(make_ctx(options={"record_reference": str(ref)}, bench={"concurrencies": [1],
              "input_len": 8, "output_len": 4, "single_stream_requests": 1}))
    results = run_group(make_ctx("--garble", options={"reference": str(ref)},
                                 bench={"concurrencies": [1], "input_len": 8, "output_len": 4,
                                        "single_stream_requests": 1}))
    checks = by_check(results)
    assert checks["correctness.greedy"].status == "FAIL"
    assert checks["correctness.greedy"].evidence["exact_match"] == 0.0
    assert checks["correctness.arithmetic"].status == "FAIL"
    assert checks["teardown"].status == "PASS"
    assert_no_leftovers(results)


def test_fatal_signature_fails_fast_while_the_process_lingers(make_ctx) -> None:
    results = run_group(make_ctx("--mode", "oom"))
    checks = by_check(results)
    assert checks["ready"].status == "FAIL"
    assert checks["ready"].evidence["verdict"] == "crashed"
    assert checks["ready"].evidence["signature"] == "CUDA out of memory"
    assert any("OutOfMemoryError" in line for line in checks["ready"].evidence["last_log_lines"])
    assert checks["sweep"].status == "SKIP"
    assert checks["teardown"].status == "PASS"
    assert_no_leftovers(results)


def test_exit_during_load_is_a_crash_with_the_last_lines(make_ctx) -> None:
    results = run_group(make_ctx("--mode", "exit"))
    ready = by_check(results)["ready"]
    assert ready.status == "FAIL" and ready.evidence["verdict"] == "crashed"
    assert ready.evidence["exit_code"] == 1
    assert "RuntimeError: synthetic load failure" in ready.evidence["last_log_lines"]
    assert_no_leftovers(results)


def test_silent_server_is_a_hang(make_ctx) -> None:
    results = run_group(make_ctx("--mode", "hang", "--load-s", "60", hang_timeout_s=3))
    ready = by_check(results)["ready"]
    assert ready.status == "FAIL" and ready.evidence["verdict"] == "hung"
    assert ready.evidence["phase"] == "load weights"
    assert by_check(results)["teardown"].status == "PASS"
    assert_no_leftovers(results)


def test_fixed_port_in_use_fails_clearly_and_the_holder_lives(make_ctx, held_port) -> None:
    port, _ = held_port
    results = run_group(make_ctx(port=port))
    launch = by_check(results)["launch"]
    assert launch.status == "FAIL"
    assert f"port {port} on 127.0.0.1 is already in use" in launch.reason
    assert str(psutil.Process().pid) in launch.reason  # the holder is named
    assert len(results) == 1  # nothing was started, so nothing to tear down
    socket.create_connection(("127.0.0.1", port)).close()  # the holder still listens


def test_server_binding_a_taken_port_is_a_crash_not_a_timeout(make_ctx, held_port) -> None:
    port, _ = held_port
    # A misconfigured command that ignores {port}: the server itself hits the clash.
    command = [sys.executable, str(Path(__file__).parent / "synthetic_server.py"),
               "--port", str(port), "--model", "synthetic", "--load-s", "0"]
    results = run_group(make_ctx(command=command))
    ready = by_check(results)["ready"]
    assert ready.status == "FAIL" and ready.evidence["verdict"] == "crashed"
    assert ready.evidence.get("signature") == "port in use"
    assert_no_leftovers(results)
    socket.create_connection(("127.0.0.1", port)).close()


def test_worker_escaping_the_group_is_killed_at_teardown(make_ctx) -> None:
    """SGLang's workers reparented to PID 1 escaped kill_process_tree; ours must not."""
    results = run_group(make_ctx("--orphan"))
    checks = by_check(results)
    assert checks["ready"].status == "PASS"
    teardown = checks["teardown"]
    assert teardown.status == "PASS", teardown.reason
    assert len(teardown.evidence["tracked"]) == 2
    assert teardown.evidence["killed_after_grace"], "the SIGTERM-ignoring helper needed SIGKILL"
    assert_no_leftovers(results)


def test_fatal_line_while_serving_fails_the_serving_check(make_ctx) -> None:
    results = run_group(make_ctx("--oom-after", "30"))
    checks = by_check(results)
    assert checks["ready"].status == "PASS" and checks["sweep"].status == "PASS"
    assert checks["serving"].status == "FAIL"
    assert "CUDA out of memory" in checks["serving"].reason
    assert_no_leftovers(results)


def test_unknown_profile_is_an_error(make_ctx) -> None:
    ctx = make_ctx()
    from dataclasses import replace

    results = run_group(replace(ctx, serve_profile="nope"))
    assert results[0].status == "ERROR" and "unknown serving profile 'nope'" in results[0].reason


def test_synthetic_command_placeholders(make_ctx) -> None:
    assert "{port}" in synthetic_command()


# Where SIGTERM lands: (stderr line to wait for, extra seconds after it, server flags, levels).
# Warm-up: the first request of the single-stream level's warm-up is being set up. Mid-stream:
# a 1000-token answer streams at 5 tok/s, so 1 s later tokens are flowing. Between levels:
# fast levels; "concurrency 4" is printed after level 1 is done and before level 4 starts.
_SIGTERM_POINTS = {
    "warm-up": ("single-stream decode", 0.0, ("--rate", "5"), [1]),
    "mid-stream": ("single-stream decode", 1.0, ("--rate", "5"), [1]),
    "between-levels": ("concurrency 4", 0.0, ("--rate", "2000"), [1, 4, 8]),
}


@pytest.mark.parametrize("point", sorted(_SIGTERM_POINTS))
def test_sigterm_to_serve_bench_still_tears_the_server_down(tmp_path: Path, point: str) -> None:
    """A CI timeout sends SIGTERM: the run must unwind through teardown, not orphan the server,
    wherever in the benchmark the signal lands (also inside the client's event loop)."""
    import subprocess

    from .conftest import write_stack
    from .sigterm import sigterm_and_expect_teardown

    marker, delay_s, flags, levels = _SIGTERM_POINTS[point]
    output_len = 1000 if flags[1] == "5" else 16
    stack = write_stack(tmp_path, "slow", {"main": {
        "engine": "openai-command", "model_path": "synthetic",
        "command": synthetic_command(*flags), "stop_grace_s": 5,
        "bench": {"input_len": 8, "output_len": output_len, "concurrencies": levels,
                  "single_stream_requests": 1},
    }})
    env = tmp_path / "env" / "bin"
    env.mkdir(parents=True)
    (env / "python").symlink_to(sys.executable)
    cli = subprocess.Popen(
        [sys.executable, "-m", "validators", "serve-bench", str(stack), "--env", str(env.parent),
         "--out-dir", str(tmp_path / "out")],
        cwd=Path(__file__).resolve().parents[2], stderr=subprocess.PIPE, text=True,
    )
    assert cli.stderr is not None
    servers: list[psutil.Process] = []
    for line in cli.stderr:
        if marker in line:  # the server is up and the benchmark is where we want it
            servers = psutil.Process(cli.pid).children(recursive=True)
            break
    assert servers, f"serve-bench never printed {marker!r}"
    sigterm_and_expect_teardown(cli, servers, delay_s=delay_s, point=point)
