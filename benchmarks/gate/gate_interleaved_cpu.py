"""The interleaved (ABBA) gate end to end on this CPU host, the way the lent H200 ran it
(benchmarks/gate_h200/gate_h200.sh reproduce): envs built by the builder and layered over a base site
(`builder build --base-site`), a known-good record made with mark-good, then
`validators gate STACK --env ENV --interleave-with BASELINE_ENV --repeats N --min-repeats N
--html ... --all --json` for an equal candidate and for one served 5% slower.

CPU and synthetic, not the GPU: the engine is tests/serve/synthetic_server.py (a real process
streaming over real HTTP at a fixed rate per stream), on a shared 2-core machine. The gate's
cwd is a folder that is removed and made again while pair 2 runs (what the device machine did
to the H200 gate's checkout), so the run also checks the issue 16 ENOENT fix.

Run:  .venv/bin/python benchmarks/gate/gate_interleaved_cpu.py [--pairs 4] [--rate 400]
Writes benchmarks/gate/results/gate_interleaved_cpu/pairs<N>/ (gate-*.json, gate-*.html, gate-*.err,
summary.json with the load average before/after each gate).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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

RESULTS = ROOT / "benchmarks" / "gate" / "results" / "gate_interleaved_cpu"
SHOWN = (
    "serve-bench.single_stream/single_stream_decode_tok_s",
    "serve-bench.single_stream/median_tpot_ms",
    "serve-bench.sweep/output_throughput@c1",
    "serve-bench.sweep/output_throughput@c4",
    "serve-bench.sweep/median_ttft_ms@c4",
)
FIELDS = ("status", "ratio", "low", "high", "baseline_mean", "candidate_mean")


def cli(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{argv} exit {done.returncode}\n{done.stderr[-3000:]}")
    return done


def gate_with_cwd_replaced(
    out: Path, env: dict[str, str], work: Path, name: str, pairs: int, known_env: str, cand_env: str
) -> dict[str, Any]:
    checkout = work / "checkout"
    checkout.mkdir(exist_ok=True)
    html = out / f"gate-{name}.html"
    argv = [
        sys.executable,
        "-m",
        "validators",
        "gate",
        name,
        "--env",
        cand_env,
        "--interleave-with",
        known_env,
        "--baseline",
        "known",
        "--repeats",
        str(pairs),
        "--min-repeats",
        str(pairs),
        "--html",
        str(html),
        "--all",
        "--json",
    ]
    load_before = os.getloadavg()
    start = time.monotonic()
    gate = subprocess.Popen(
        argv,
        cwd=checkout,
        env={**env, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert gate.stderr is not None
    seen = []
    replaced = False
    for line in gate.stderr:
        seen.append(line)
        if line.startswith("pair 2/"):
            shutil.rmtree(checkout)
            checkout.mkdir()
            replaced = True
            break
    stdout, rest = gate.communicate()
    wall = time.monotonic() - start
    (out / f"gate-{name}.json").write_text(stdout)
    (out / f"gate-{name}.err").write_text("".join(seen) + rest)
    payload = json.loads(stdout) if stdout.strip() else {}
    metrics = {m["key"]: m for m in payload.get("metrics", [])}
    return {
        "candidate": name,
        "exit_code": gate.returncode,
        "passed": payload.get("passed"),
        "cwd_replaced_in_pair_2": replaced,
        "wall_s": round(wall, 1),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "regressions": sorted(k for k, m in metrics.items() if m["status"] == "REGRESSION"),
        "shown": {k: {f: metrics[k].get(f) for f in FIELDS} for k in SHOWN if k in metrics},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--rate", type=float, default=400.0)
    parser.add_argument("--slowdown", type=float, default=0.05)
    parser.add_argument("--out", type=Path, default=None, help="default: RESULTS/pairs<N>")
    args = parser.parse_args()
    out: Path = args.out or RESULTS / f"pairs{args.pairs}"
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="stackgate-gate-interleaved-"))
    stacks = work / "stacks"
    stacks.mkdir()
    env = isolated_env(work, stacks)
    py = base_python()
    base = work / "base-venv"
    subprocess.run(["uv", "venv", "-q", "--python", py, str(base)], check=True, env=env)
    subprocess.run(
        ["uv", "pip", "install", "-q", "--python", str(base / "bin" / "python"), "six"],
        check=True,
        env=env,
    )
    site = str(next(base.glob("lib/python3.*/site-packages")))
    rates = {"known": args.rate, "same": args.rate, "slower": args.rate * (1 - args.slowdown)}
    envs = {}
    for name, rate in rates.items():
        write_synthetic_stack(stacks, work, name, rate, output_len=32, concurrencies=(1, 4))
        cli(env, "builder", "lock", name, "--python", py)
        cli(env, "builder", "build", name, "--python", py, "--base-site", site)
        envs[name] = str(work / "envs" / name / "current")
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
    runs: list[str] = []
    for i in range(args.pairs):
        done = cli(env, "validators", "run", "known", "--env", envs["known"], "--json")
        (work / f"k{i}.json").write_text(done.stdout)
        runs += ["--run", str(work / f"k{i}.json")]
    cli(env, "validators", "mark-good", "known", *runs, "--allow-host-mismatch")
    results = [
        gate_with_cwd_replaced(out, env, work, name, args.pairs, envs["known"], envs[name])
        for name in ("same", "slower")
    ]
    summary = {
        "what": "CPU/synthetic, not the GPU: tests/serve/synthetic_server.py on a shared 2-core "
        "host; envs layered over a base site; gate cwd replaced during pair 2",
        "pairs": args.pairs,
        "rates_tok_s_per_stream": rates,
        "cpus": os.cpu_count(),
        "gates": results,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
