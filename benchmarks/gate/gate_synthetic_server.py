"""The gate end to end on real processes: a known-good synthetic server vs an equal one and one
configured 5% slower, with the candidate's runs after the baseline's (sequential) and in ABBA
order with a re-measured baseline (interleaved). Also prints the run-to-run noise measured.

Everything is real except the engine: builder lock/build (two envs), `validators run` with the
serve-bench group (launch, readiness, greedy correctness, single-stream, sweep, teardown) against
tests/serve/synthetic_server.py streaming at a fixed rate per stream, mark-good, gate.

This machine is shared (2 vCPU, other jobs running): its noise is far above a dedicated GPU
host's for latencies, which is the point of measuring it here — the rate-bound numbers (decode
tok/s, TPOT) stay tight, scheduling-bound ones (TTFT, high-concurrency ITL) do not.

Run:  .venv/bin/python benchmarks/gate/gate_synthetic_server.py [--repeats 8] [--rate 400]
Writes benchmarks/gate/results/gate_synthetic_server.json and .md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.helpers.interpreter import base_python  # noqa: E402
from tests.helpers.project_env import isolated_env  # noqa: E402
from tests.helpers.synthetic_stack import write_synthetic_stack  # noqa: E402
from validators.records.metrics import direction, parse_metric_key  # noqa: E402

KEY_METRICS = (
    "serve-bench.single_stream/single_stream_decode_tok_s",
    "serve-bench.single_stream/median_tpot_ms",
    "serve-bench.sweep/output_throughput@c1",
    "serve-bench.sweep/output_throughput@c4",
    "serve-bench.sweep/output_throughput@c16",
    "serve-bench.sweep/median_ttft_ms@c4",
)


def cli(env: dict[str, str], *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    if check and done.returncode != 0:
        raise SystemExit(f"{argv} exit {done.returncode}\n{done.stderr[-3000:]}")
    return done


def summarize(gate_json: dict[str, Any]) -> dict[str, Any]:
    metrics = {m["key"]: m for m in gate_json["metrics"]}
    return {
        "passed": gate_json["passed"],
        "reasons": gate_json["reasons"],
        "key_metrics": {
            k: {
                f: metrics[k][f]
                for f in ("status", "ratio", "low", "high", "cv_baseline", "cv_candidate")
            }
            for k in KEY_METRICS
            if k in metrics
        },
        "regressions": sorted(
            m["key"] for m in gate_json["metrics"] if m["status"] == "REGRESSION"
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--rate", type=float, default=400.0, help="tokens/s per stream")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "gate" / "results")
    args = parser.parse_args()
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="stackgate-gate-bench-"))
    stacks = work / "stacks"
    stacks.mkdir()
    (stacks / "rules.toml").write_bytes((ROOT / "stacks" / "rules.toml").read_bytes())
    write_synthetic_stack(stacks, work, "known", args.rate)
    write_synthetic_stack(stacks, work, "same", args.rate)
    write_synthetic_stack(stacks, work, "slower", args.rate * 0.95)
    env = isolated_env(work, stacks)
    envs = {}
    for name in ("known", "same", "slower"):
        cli(env, "builder", "lock", name, "--python", base_python())
        built = cli(env, "builder", "build", name, "--python", base_python(), "--json")
        envs[name] = json.loads(built.stdout)["env"]
    cli(
        env,
        "validators",
        "run",
        "known",
        "--env",
        envs["known"],
        "--option",
        f"record_reference={stacks / 'refs' / 'main.json'}",
    )
    runs = []
    for i in range(args.repeats):
        path = work / f"known-{i}.json"
        path.write_text(
            cli(env, "validators", "run", "known", "--env", envs["known"], "--json").stdout
        )
        runs += ["--run", str(path)]
    marked = json.loads(
        cli(
            env, "validators", "mark-good", "known", *runs, "--allow-host-mismatch", "--json"
        ).stdout
    )
    record_id = marked["record_id"]
    record = json.loads(cli(env, "validators", "records", "show", record_id, "--json").stdout)
    noise = {}
    for key, samples in sorted(record["metrics"].items()):
        if direction(key) != "none" and len(samples) >= 2 and statistics.fmean(samples) > 0:
            noise[key] = statistics.stdev(samples) / statistics.fmean(samples)
    results: dict[str, Any] = {}
    repeats = str(args.repeats)
    orders = {"sequential": [], "interleaved": ["--interleave-with", envs["known"]]}
    for name in ("same", "slower"):
        for order, extra in orders.items():
            t0 = time.monotonic()
            done = cli(
                env,
                "validators",
                "gate",
                name,
                "--env",
                envs[name],
                "--repeats",
                repeats,
                "--baseline",
                record_id,
                *extra,
                "--json",
                check=False,
            )
            results[f"{name}/{order}"] = {
                **summarize(json.loads(done.stdout)),
                "exit": done.returncode,
                "seconds": round(time.monotonic() - t0, 1),
            }
        print(f"{name}: done ({time.monotonic() - started:.0f} s)", flush=True)
    out = {
        "repeats": args.repeats,
        "rate_tok_s_per_stream": args.rate,
        "noise_cv": noise,
        "gates": results,
        "seconds": round(time.monotonic() - started, 1),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gate_synthetic_server.json").write_text(json.dumps(out, indent=2) + "\n")
    md = [
        "# Gate end to end on the synthetic server (benchmarks/gate/gate_synthetic_server.py)",
        "",
        f"{args.repeats} runs per side; {args.rate:.0f} tok/s per stream (slower: 5% less); "
        f"run time {out['seconds']} s on this shared 2-vCPU machine.",
        "",
        "| candidate | order | exit | verdict | regressions | decode tok/s ratio [interval] "
        "| output_throughput@c16 ratio [interval] |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, r in results.items():
        name, order = label.split("/")
        km = r["key_metrics"]

        def cell(key: str, km: dict[str, Any] = km) -> str:
            m = km.get(key)
            if not m or m["ratio"] is None:
                return "-"
            return f"{m['ratio']:.3f} [{m['low']:.3f}, {m['high']:.3f}] {m['status']}"

        md.append(
            f"| {name} | {order} | {r['exit']} | {'PASSED' if r['passed'] else 'REFUSED'} "
            f"| {len(r['regressions'])} | {cell(KEY_METRICS[0])} | {cell(KEY_METRICS[4])} |"
        )
    md += ["", "Regressions named per gate:", ""]
    for label, r in results.items():
        md.append(f"- {label}: {', '.join(r['regressions']) or 'none'}")
    md += [
        "",
        "Run-to-run noise of the known-good record (CV over its runs), by metric family:",
        "",
        "| metric | CV |",
        "|---|---|",
    ]
    for key, cv in sorted(noise.items(), key=lambda kv: kv[1]):
        if parse_metric_key(key).name.startswith(("std_", "max_")):
            continue
        md.append(f"| {key} | {cv:.2%} |")
    (args.out / "gate_synthetic_server.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
