"""Does the fleet verdict find lemons, and how often does it flag a healthy node?

Simulates fleet runs of 1,000 nodes in three host classes (600 / 300 / 100 nodes, each with
its own baseline numbers) and runs the real rule on them (validators.fleet.outliers.
find_lemons, the code `fleet collect` runs). Each node reports `--runs` samples per metric:

    sample = baseline_of_class x node_factor x slowdown x (1 + cv x e),  e ~ N(0, 1)

- run-to-run noise (cv) as measured: decode tok/s 0.74% and output throughput 3.46%
  (benchmarks/gate/results/gate_synthetic_server.md, CV over 8 runs of the known-good record), NCCL
  1-token all-reduce p50 3.19% (benchmarks/runtime_h200/results/README.md: three interleaved
  repeats 66.8 / 65.5 / 69.7 us on an H200 pair);
- node_factor: how much healthy nodes of one class differ from each other. Not measured (one
  host was lent at a time), so it is a row of the table: 0%, 0.5%, 1% (normal, sd);
- lemons: 3% of the nodes, in equal parts 3%, 5% and 10% slower; half are GPU lemons (decode
  tok/s and throughput down by the slowdown), half link lemons (all-reduce latency up by it).

Reported per (node spread, slowdown, lemon kind): detection rate (the lemon is flagged on a
metric its kind affects) with a Wilson 95% interval; and false flags: healthy nodes flagged,
per fleet run and as a rate.

Run:  .venv/bin/python benchmarks/fleet/fleet_lemons.py [--fleets 40] [--runs 8]
Writes benchmarks/fleet/results/fleet_lemons.json and .md.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from validators.fleet.outliers import DEFAULT_Z, MIN_EFFECT, find_lemons  # noqa: E402

DECODE = "serve-bench.single_stream/single_stream_decode_tok_s"
THROUGHPUT = "serve-bench.single_stream/output_throughput"
NCCL = "runtime.nccl_latency/allreduce_1tok_p50_us"
CV = {DECODE: 0.0074, THROUGHPUT: 0.0346, NCCL: 0.0319}
# name -> (nodes, decode tok/s, throughput tok/s, all-reduce p50 us)
CLASSES = {
    "8x RTX PRO 6000 (pcie)": (600, 48.0, 2100.0, 95.0),
    "8x H200 (nvlink)": (300, 62.0, 2900.0, 68.0),
    "8x H100 (nvlink)": (100, 55.0, 2500.0, 72.0),
}
SLOWDOWNS = (0.03, 0.05, 0.10)
LEMON_SHARE = 0.03
SPREADS = (0.0, 0.005, 0.01)
GPU_METRICS = (DECODE, THROUGHPUT)
LINK_METRICS = (NCCL,)


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def one_fleet(
    rng: np.random.Generator, spread: float, runs: int
) -> tuple[dict[str, dict[str, dict[str, list[float]]]], dict[str, tuple[str, float]]]:
    """{class: {node: {metric: samples}}} and {lemon node: (kind, slowdown)}."""
    fleet: dict[str, dict[str, dict[str, list[float]]]] = {}
    lemons: dict[str, tuple[str, float]] = {}
    for cname, (count, decode, tput, nccl) in CLASSES.items():
        nodes: dict[str, dict[str, list[float]]] = {}
        picks = rng.choice(count, size=round(count * LEMON_SHARE), replace=False)
        kinds = {
            int(i): (("gpu", "link")[j % 2], SLOWDOWNS[(j // 2) % len(SLOWDOWNS)])
            for j, i in enumerate(picks)
        }
        for i in range(count):
            name = f"{cname[:6].strip()}-{i:04d}"
            factor = 1.0 + spread * rng.standard_normal()
            kind, slow = kinds.get(i, ("", 0.0))
            gpu = 1.0 - slow if kind == "gpu" else 1.0
            link = 1.0 + slow if kind == "link" else 1.0
            means = {
                DECODE: decode * factor * gpu,
                THROUGHPUT: tput * factor * gpu,
                NCCL: nccl / factor * link,
            }
            nodes[name] = {
                m: list(mu * (1.0 + CV[m] * rng.standard_normal(runs))) for m, mu in means.items()
            }
            if kind:
                lemons[name] = (kind, slow)
        fleet[cname] = nodes
    return fleet, lemons


def simulate(fleets: int, runs: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    for spread in SPREADS:
        caught: dict[tuple[str, float], list[int]] = {}
        false_flags = 0
        healthy = 0
        per_fleet: list[int] = []
        for _ in range(fleets):
            fleet, lemons = one_fleet(rng, spread, runs)
            flagged: dict[str, set[str]] = {}
            for nodes in fleet.values():
                _, outliers = find_lemons(nodes)
                for o in outliers:
                    flagged.setdefault(o.node, set()).add(o.metric)
            this_false = 0
            for nodes in fleet.values():
                for node in nodes:
                    if node in lemons:
                        kind, slow = lemons[node]
                        wanted = GPU_METRICS if kind == "gpu" else LINK_METRICS
                        hit = bool(flagged.get(node, set()) & set(wanted))
                        caught.setdefault((kind, slow), [0, 0])
                        caught[(kind, slow)][0] += hit
                        caught[(kind, slow)][1] += 1
                    else:
                        healthy += 1
                        this_false += node in flagged
            false_flags += this_false
            per_fleet.append(this_false)
        for (kind, slow), (k, n) in sorted(caught.items()):
            lo, hi = wilson(k, n)
            rows.append(
                {
                    "spread": spread,
                    "kind": kind,
                    "slowdown": slow,
                    "detected": k,
                    "lemons": n,
                    "rate": k / n,
                    "ci": [lo, hi],
                }
            )
        lo, hi = wilson(false_flags, healthy)
        rows.append(
            {
                "spread": spread,
                "kind": "healthy",
                "false_flags": false_flags,
                "healthy": healthy,
                "rate": false_flags / healthy,
                "ci": [lo, hi],
                "per_fleet_mean": float(np.mean(per_fleet)),
                "per_fleet_max": int(np.max(per_fleet)),
            }
        )
    return {"rows": rows}


SMALL_SIZES = (5, 6, 8, 10, 20, 50)
SMALL_RUNS = (2, 8)
SMALL_SPREAD = 0.005


def small_classes(trials: int, seed: int) -> list[dict[str, Any]]:
    """False flags in classes of a few healthy nodes: where MAD over few values is unsteady."""
    rng = np.random.default_rng(seed + 1)
    _, decode, tput, nccl = CLASSES["8x H200 (nvlink)"]
    rows = []
    for size in SMALL_SIZES:
        for runs in SMALL_RUNS:
            flagged_nodes = 0
            classes_flagged = 0
            for _ in range(trials):
                nodes = {}
                for i in range(size):
                    factor = 1.0 + SMALL_SPREAD * rng.standard_normal()
                    means = {DECODE: decode * factor, THROUGHPUT: tput * factor, NCCL: nccl / factor}
                    nodes[f"n{i}"] = {
                        m: list(mu * (1.0 + CV[m] * rng.standard_normal(runs)))
                        for m, mu in means.items()
                    }
                _, outliers = find_lemons(nodes)
                hit = {o.node for o in outliers}
                flagged_nodes += len(hit)
                classes_flagged += bool(hit)
            rows.append(
                {
                    "nodes": size,
                    "runs": runs,
                    "classes": trials,
                    "classes_with_a_false_flag": classes_flagged / trials,
                    "node_rate": flagged_nodes / (trials * size),
                }
            )
    return rows


def markdown(result: dict[str, Any], args: argparse.Namespace, seconds: float) -> str:
    out = [
        "# Lemons in a 1,000-node fleet (benchmarks/fleet/fleet_lemons.py)",
        "",
        f"{args.fleets} simulated fleet runs per row; 1,000 nodes each in 3 host classes "
        "(600 / 300 / 100); "
        f"{args.runs} runs per node; {LEMON_SHARE:.0%} of the nodes are lemons (3% / 5% / 10% "
        "slower in equal parts; half GPU lemons: decode tok/s and throughput down, half link "
        "lemons: all-reduce latency up). Rule: validators/fleet/outliers.py, "
        f"Z = {DEFAULT_Z:g}, minimum effect {MIN_EFFECT:.0%}. Run-to-run noise as measured: "
        "decode tok/s 0.74%, throughput 3.46%, NCCL 1-token p50 3.19%. "
        "Node spread (healthy nodes of one class differing from each other) was not measured "
        "and is the row. Seed " + str(args.seed) + ".",
        "",
        "| node spread | lemon | slowdown | detected | rate [95% CI] |",
        "|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        if r["kind"] == "healthy":
            continue
        out.append(
            f"| {r['spread']:.1%} | {r['kind']} | {r['slowdown']:.0%} | {r['detected']}/{r['lemons']} | "
            f"{r['rate']:.1%} [{r['ci'][0]:.1%}, {r['ci'][1]:.1%}] |"
        )
    out += [
        "",
        "False flags (a healthy node called a lemon):",
        "",
        "| node spread | flagged / healthy nodes | rate [95% CI] | per fleet run: mean / max |",
        "|---|---|---|---|",
    ]
    for r in result["rows"]:
        if r["kind"] != "healthy":
            continue
        out.append(
            f"| {r['spread']:.1%} | {r['false_flags']}/{r['healthy']} | {r['rate']:.4%} "
            f"[{r['ci'][0]:.4%}, {r['ci'][1]:.4%}] | {r['per_fleet_mean']:.2f} / {r['per_fleet_max']} |"
        )
    out += [
        "",
        f"Small classes, healthy nodes only (node spread {SMALL_SPREAD:.1%}, same run noise; "
        f"{args.small_trials} classes per row): how often a class shows at least one false flag",
        "",
        "| nodes in the class | runs per node | classes with a false flag | healthy nodes flagged |",
        "|---|---|---|---|",
    ]
    for r in result["small"]:
        out.append(
            f"| {r['nodes']} | {r['runs']} | {r['classes_with_a_false_flag']:.2%} | {r['node_rate']:.3%} |"
        )
    out += ["", f"Run time: {seconds:.1f} s on this machine.", ""]
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fleets", type=int, default=40)
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--small-trials", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "fleet" / "results")
    args = parser.parse_args()
    started = time.monotonic()
    result = simulate(args.fleets, args.runs, args.seed)
    result["small"] = small_classes(args.small_trials, args.seed)
    seconds = time.monotonic() - started
    args.out.mkdir(parents=True, exist_ok=True)
    payload = {"fleets": args.fleets, "runs": args.runs, "seed": args.seed, **result}
    (args.out / "fleet_lemons.json").write_text(json.dumps(payload, indent=2) + "\n")
    text = markdown(result, args, seconds)
    (args.out / "fleet_lemons.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
