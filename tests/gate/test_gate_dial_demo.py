"""The demonstration driver (benchmarks/gate/gate_dial_demo.py) on the CPU: its plan (--dry-run,
run for real), the Prometheus window arithmetic on text in SGLang's exposition format, and the
judging step (records, the real gate, JSON + HTML) on numbers drawn here. The GPU, the SGLang
servers and their benches cannot run here; the numbers stand for the benches' output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gate" / "gate_dial_demo.py"
sys.path.insert(0, str(SCRIPT.parent))
sys.path.insert(0, str(ROOT / "tests" / "serve"))
import gate_dial_demo as demo  # noqa: E402


def _dry(tmp_path: Path, *more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), "--env", str(tmp_path), "--model-dir",
                           str(tmp_path), "--res", str(tmp_path / "r"), "--dry-run", *more],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip


def test_the_plan_interleaves_abba_and_gates_every_candidate(tmp_path: Path) -> None:
    done = _dry(tmp_path)
    assert done.returncode == 0, done.stderr
    *body, last = done.stdout.strip().splitlines()
    steps = json.loads("\n".join(body))
    assert last.startswith("PLANNED:") and not (tmp_path / "r").exists()  # nothing started
    gates = [s["what"].split()[1] for s in steps if s["what"].startswith("gate ")]
    assert gates == ["equal-1", "dial-3", "dial-5", "mrr15", "equal-2"]
    dials = {"equal-1": "0.0", "dial-3": "0.03", "dial-5": "0.05", "mrr15": "0.0", "equal-2": "0.0"}
    for gate in gates:
        benches = [s for s in steps if s["what"].startswith(f"bench {gate} pair ")]
        sides = [s["side"] for s in benches]
        assert len(sides) == 2 * demo.PAIRS
        assert sides[:4] == ["A", "B", "B", "A"]  # A,B,B,A
        # A is D undialled; B is D at the gate's dial, or M (mrr15)
        assert {s["env"]["STACKGATE_DIAL"] for s in benches if s["side"] == "A"} == {"0.0"}
        assert {s["env"]["STACKGATE_DIAL"] for s in benches if s["side"] == "B"} == {dials[gate]}
        assert all(s["what"].endswith(" on D") for s in benches if s["side"] == "A")
    starts = [s["side"] for s in steps if s["what"].startswith("start ")]
    assert starts == ["D", "M"]  # the dials change D without a restart


def test_too_few_pairs_for_the_family_goal_are_refused(tmp_path: Path) -> None:
    done = _dry(tmp_path, "--pairs", "6")
    assert done.returncode == 2 and "2^6 = 64" in done.stderr


def test_server_commands_pin_what_the_design_needs(tmp_path: Path) -> None:
    a = demo.server_cmd(tmp_path, tmp_path / "m", "D", demo.A_MEM)
    m = demo.server_cmd(tmp_path, tmp_path / "m", "M", demo.B_MEM)
    for cmd in (a, m):
        assert cmd[cmd.index("--load-format") + 1] == "dummy"
        assert "--enable-metrics" in cmd and "--disable-radix-cache" in cmd
        assert cmd[cmd.index("--max-total-tokens") + 1] == str(demo.MAX_TOTAL_TOKENS)
        assert cmd[cmd.index("--attention-backend") + 1] == "triton"  # no FlashInfer JIT
    assert m[-2:] == ["--max-running-requests", "15"] and "--max-running-requests" not in a
    bench = demo.bench_cmd(tmp_path, tmp_path / "m", 1, tmp_path / "o", demo.Bench(),
                           concurrency=16, prompts=16, output_len=128)  # fmt: skip
    assert bench[bench.index("--dataset-name") + 1] == "random-ids"
    assert bench[bench.index("--random-range-ratio") + 1] == "1"
    assert "--disable-ignore-eos" not in bench  # SGLang's client ignores EOS by default


PROM = """# HELP sglang:time_per_output_token_seconds Histogram of time per output token.
# TYPE sglang:time_per_output_token_seconds histogram
sglang:time_per_output_token_seconds_bucket{le="0.01",model_name="m"} 3.0
sglang:time_per_output_token_seconds_sum{model_name="m"} %s
sglang:time_per_output_token_seconds_count{model_name="m"} %s
sglang:time_to_first_token_seconds_sum{model_name="m"} %s
sglang:time_to_first_token_seconds_count{model_name="m"} %s
"""


def test_the_server_window_is_the_difference_of_the_histograms() -> None:
    before = demo.prometheus_sums(PROM % (1.0, 100, 2.0, 10))
    after = demo.prometheus_sums(PROM % (1.0 + 16 * 127 * 0.03, 100 + 16 * 127, 2.0 + 16 * 0.2, 26))
    window = demo.server_window(before, after)
    assert window["server_mean_tpot_ms"] == pytest.approx(30.0)
    assert window["server_mean_ttft_ms"] == pytest.approx(200.0)
    assert "server_mean_itl_ms" not in window  # not exported: not invented


def _bench(rng: np.random.Generator, slow: float) -> dict[str, float]:
    f = float(np.exp(rng.normal(0, 0.008)))
    sweep = {"output_throughput": 2000 * (1 - slow) * f, "median_ttft_ms": 300 / f / (1 - slow),
             "median_tpot_ms": 30 / f / (1 - slow), "median_itl_ms": 29 / f / (1 - slow),
             "p99_ttft_ms": 320 / f / (1 - slow)}  # fmt: skip
    out = demo.metric_fields("sweep", sweep, {"server_mean_tpot_ms": 30.0}, 16)
    return out | demo.metric_fields("single", {"median_tpot_ms": 25 / f / (1 - slow)}, {}, 1)


@pytest.mark.parametrize(("slow", "verdict"), [(0.0, "PASSED"), (0.05, "REFUSED")])
def test_judging_writes_the_gate_json_and_html(tmp_path: Path, slow: float, verdict: str) -> None:
    rng = np.random.default_rng(7)
    run = demo.Demo(tmp_path, tmp_path, tmp_path, demo.Bench(), 900)
    (tmp_path / "gates").mkdir()
    a = [_bench(rng, 0.0) for _ in range(8)]
    b = [_bench(rng, slow) for _ in range(8)]
    found = demo.judge(run, "equal-1" if slow == 0 else "dial-5", a, b, 123.4)
    assert found["verdict"] == verdict and found["gpu_s"] == 123.4
    payload = json.loads((tmp_path / "gates" / f"{found['gate']}.json").read_text())
    assert payload["verdict"] == verdict and payload["family"]["paired"] is True
    assert payload["gpu_seconds"] == 123.4
    gated = {m["key"] for m in payload["metrics"] if m["gated"]}
    # the demonstration's pre-registered list (dial_profile), not the product's default
    assert gated == {f"serve-bench.sweep/{k}@c16" for k in
                     ("output_throughput", "median_itl_ms", "median_ttft_ms", "p99_ttft_ms")}  # fmt: skip
    assert "serve-bench.sweep/server_mean_tpot_ms@c16" not in gated  # reported beside, not gated
    html = (tmp_path / "gates" / f"{found['gate']}.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and verdict in html


def test_the_config_is_kimis_shape_and_two_servers_fit_one_h100() -> None:
    """SGLang 0.5.17 sizes the KV pool as free_after_weights - free_before_load x (1 - f): D at
    0.45 of an empty 78 GiB card, M at 0.80 of what D leaves; both need the weights and the
    pinned KV pool (MAX_TOTAL_TOKENS). The device run's shape: 32 layers, bf16 experts (no INT4
    Marlin module to compile on a fresh machine). Arithmetic only; the GPU run is the proof."""
    import kimi_full_depth as kfd
    from make_kimi_mini import KIMI, model_config

    config = model_config(KIMI, 32, 8, 32000, False)
    assert config["num_hidden_layers"] == 32 and config["hidden_size"] == 7168
    assert (config["kv_lora_rank"], config["q_lora_rank"], config["moe_intermediate_size"]) == (
        512, 1536, 2048)  # fmt: skip
    assert config["num_experts_per_tok"] == 8 == config["n_routed_experts"]
    assert "quantization_config" not in config
    assert model_config(KIMI, kfd.LAYERS, 8, 32000, True)["quantization_config"]["format"] == (
        "pack-quantized")  # fmt: skip
    for layers, int4 in ((32, False), (kfd.LAYERS, True)):
        est = kfd.estimate(8, 32000, layers, int4)
        weights = est["weights_gib"]
        kv = demo.MAX_TOTAL_TOKENS * est["kv_kib_per_token"] / 1024**2
        card = 78.0
        a_pool = (card - weights) - card * (1 - demo.A_MEM)
        assert a_pool >= kv, (layers, a_pool, kv)
        a_holds = weights + a_pool + 2.0  # + CUDA graphs, context
        b_free = card - a_holds
        b_pool = (b_free - weights) - b_free * (1 - demo.B_MEM)
        assert b_pool >= kv, (layers, b_pool, kv)
    # full depth with bf16 experts would not fit twice
    assert 2 * kfd.estimate(8, 32000, 61, False)["weights_gib"] > 78.0


def test_the_device_script_parses_and_names_files_that_exist() -> None:
    script = ROOT / "benchmarks" / "gate" / "gate_dial_device.sh"
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    text = script.read_text()
    import re

    named = set(re.findall(r"(?:benchmarks|tests)/[A-Za-z0-9_./-]+\.(?:py|sh)", text))
    assert "benchmarks/gate/gate_dial_demo.py" in named
    assert [n for n in named if not (ROOT / n).is_file()] == []


def _stand_in_env(tmp_path: Path) -> tuple[Path, Path]:
    """An env whose `python -m sglang.launch_server` is the synthetic token server (the engine
    cannot run here) on the same port and model path, slowed by the dial's control file
    (STACKGATE_DIAL_FILE) as the dial slows the engine; --max-running-requests is ignored."""
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    server = ROOT / "tests" / "serve" / "synthetic_server.py"
    script = env / "bin" / "python"
    script.write_text(f"""#!/bin/bash
[ "$1 $2" = "-m sglang.launch_server" ] || {{ echo "stand-in: $*" >&2; exit 2; }}
shift 2
while [ $# -gt 0 ]; do case $1 in --port) port=$2; shift;; --model-path) model=$2; shift;; esac; shift; done
dial=()
[ -n "${{STACKGATE_DIAL_FILE:-}}" ] && dial=(--rate-file "$STACKGATE_DIAL_FILE")
exec {sys.executable} {server} --port "$port" --model "$model" --rate 400 --load-s 0.1 "${{dial[@]}}"
""")
    script.chmod(0o755)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    return env, model


@pytest.mark.slow
def test_the_driver_runs_every_gate_on_a_stand_in_server_and_stops_at_its_budget(
    tmp_path: Path,
) -> None:
    """The whole driver for real, the engine replaced by the synthetic server: servers started
    and stopped, D's dial set per side (the server's log shows every B-side request of the
    dial gates at the gate's fraction: 16 warm-up + 16 measured a bench), our client, the
    Prometheus windows, five gates judged (JSON + HTML). The verdicts are this loaded CPU's
    noise, not asserted."""
    env, model = _stand_in_env(tmp_path)
    res = tmp_path / "res"
    argv = [sys.executable, str(SCRIPT), "--env", str(env), "--model-dir", str(model), "--res",
            str(res), "--pairs", "7", "--budget-s", "300", "--no-client-comparison"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    last = done.stdout.strip().splitlines()[-1]
    assert done.returncode in (0, 1), done.stderr[-2000:]
    assert last.endswith("/5 gates as pre-registered (5 run)"), last
    for gate in ("equal-1", "dial-3", "dial-5", "mrr15", "equal-2"):
        payload = json.loads((res / "gates" / f"{gate}.json").read_text())
        assert payload["family"]["paired"] is True and payload["verdict"] in (
            "PASSED", "REFUSED", "INCONCLUSIVE", "UNDERPOWERED")  # fmt: skip
        windows = [m for m in payload["metrics"] if m["key"].endswith("server_mean_tpot_ms@c16")]
        assert windows and not windows[0]["gated"]
        assert (res / "gates" / f"{gate}.html").read_text().startswith("<!DOCTYPE html>")
    served = (res / "server-D.log").read_text()
    for fraction in ("0.03", "0.05"):
        assert served.count(f"request served at slowdown {fraction}\n") == 7 * 32
    assert "slowdown" not in (res / "server-M.log").read_text()  # M has no dial
    # a budget that the next gate would overrun: it is not started, and the driver says so
    short = [*argv[:-3], "--budget-s", "8", "--no-client-comparison"]
    short[short.index(str(res))] = str(tmp_path / "short")
    done = subprocess.run(short, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 1
    spent = [json.loads(x) for x in done.stdout.splitlines() if '"budget spent"' in x]
    assert spent and spent[0]["left"] == ["equal-1", "dial-3", "dial-5", "mrr15", "equal-2"]
    assert done.stdout.strip().splitlines()[-1] == "INCOMPLETE: 0/5 gates as pre-registered (0 run)"
