"""The bisect's searches on 1,000 simulated candidates, with the gate's measured noise.

Each candidate: 10-60 change units (uniform), 1-3 culprit groups: a single unit that regresses
alone, or (with probability --interaction) a pair that regresses only together. A step (a
subset of units applied to the baseline) truly regresses when it holds every member of some
group. The gate answering for it is noisy at the rates measured for the gate's defaults
(benchmarks/gate/results/gate_power.json, `verified`: power on a 3% regression and the gate false
alarm over 25 metrics): a regressing step is caught with probability `power`, an equal one
is refused with probability `gate_false_alarm`; every measurement is a fresh draw (a step
measured again is gated again).

The search is validators/bisect/search.py's `bisect()`, the function `validators bisect` runs,
driven here by a simulated gate in place of Bisect.gate (build + gate of the step). Two inputs:
- `stack`: `--bad STACK`: the whole candidate is one more prefix, gated when its verdict
  tells the most, counted like every other gate ("none of them": named only at 99%, wrong
  here);
- `refused`: `--bad GATE.json`: the whole candidate's first verdict is the refused gate's, not
  a gate the bisect spends (the refusal is given: the simulation conditions on it).

Right: the named groups equal the true groups (binary search can name one unit only, so for
it "right" is: the named unit is a single-unit culprit, or a member of a group). Reported per
search, input and class: how often right, median and p90 gates the bisect spent, and the
goal (>= 95% right at <= log2(units)+2 gates for single culprits).

Run:  .venv/bin/python benchmarks/bisect/bisect_search.py [--trials 1000] [--seed 26] [--name NAME]
Writes benchmarks/bisect/results/NAME.json and .md (default bisect_search).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from validators.bisect.search import MODES, Mode, Noise, bisect  # noqa: E402

RESULTS = ROOT / "benchmarks" / "bisect" / "results"


@dataclass(frozen=True)
class Candidate:
    units: int
    groups: tuple[frozenset[int], ...]

    @property
    def kind(self) -> str:
        if len(self.groups) == 1:
            return "single" if len(self.groups[0]) == 1 else "pair"
        return f"{len(self.groups)} groups"

    def regresses(self, subset: frozenset[int]) -> bool:
        return any(g <= subset for g in self.groups)


def draw(rng: random.Random, interaction: float, singles_only: bool) -> Candidate:
    n = rng.randint(10, 60)
    count = 1 if singles_only else rng.choice((1, 1, 2, 3))
    picked = rng.sample(range(n), 2 * count)
    groups = []
    for i in range(count):
        pair = not singles_only and rng.random() < interaction
        groups.append(frozenset(picked[2 * i : 2 * i + 2] if pair else picked[2 * i : 2 * i + 1]))
    return Candidate(n, tuple(groups))


def run_one(
    cand: Candidate, mode: Mode, noise: Noise, refused: bool, rng: random.Random
) -> dict[str, object]:
    gates = 0
    whole = frozenset(range(cand.units))

    def gate(subset: frozenset[int], attempt: int) -> bool:
        nonlocal gates
        if refused and subset == whole and attempt == 1:
            return True  # the refused gate's verdict, given
        gates += 1
        truth = cand.regresses(subset)
        return rng.random() < (noise.power if truth else noise.false_alarm)

    found = bisect(mode, cand.units, gate, refused=refused)  # the product's own noise model
    named = [c.units for c in found or []]
    truth = set(cand.groups)
    if not named:
        right = False
    elif mode == "binary":
        unit = next(iter(named[0]))
        right = any(unit in g for g in truth)
    else:
        right = set(named) == truth
    return {"right": right, "gates": gates, "named": [sorted(g) for g in named]}


def summarize(rows: list[dict[str, object]]) -> dict[str, object]:
    gates = [int(r["gates"]) for r in rows]  # type: ignore[call-overload]
    within = [r for r in rows if int(r["gates"]) <= math.log2(int(r["units"])) + 2]  # type: ignore[call-overload]
    right = sum(bool(r["right"]) for r in rows)
    return {
        "n": len(rows),
        "right": right / len(rows) if rows else None,
        "median_gates": statistics.median(gates) if gates else None,
        "p90_gates": sorted(gates)[int(0.9 * (len(gates) - 1))] if gates else None,
        "right_within_log2_plus_2": sum(bool(r["right"]) for r in within) / len(rows)
        if rows
        else None,
        "median_log2_units_plus_2": statistics.median(math.log2(int(r["units"])) + 2 for r in rows)
        if rows
        else None,  # type: ignore[call-overload]
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--interaction", type=float, default=0.3, help="P(a group is a pair)")
    parser.add_argument("--name", default="bisect_search", help="results/<name>.json and .md")
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="the simulated gate runs N repeats (`validators bisect --repeats N`): its power "
        "and false alarm from gate_power.json's row for N (cv 1%%, tolerance 1.25%%, 95%%); "
        "the search keeps its own noise model (Noise(), the 8-repeat gate's), as the product "
        "does",
    )
    args = parser.parse_args()
    power_rows = json.loads((ROOT / "benchmarks" / "gate" / "results" / "gate_power.json").read_text())
    measured = power_rows["verified"]
    source = "benchmarks/gate/results/gate_power.json verified (repeats 8, 1.25%, cv 1%)"
    if args.repeats is not None:
        measured = next(
            r for r in power_rows["rows"]
            if r["repeats"] == args.repeats and r["cv"] == 0.01 and r["tails"] == "normal"
            and abs(r["tolerance"] - 0.0125) < 1e-9 and r["confidence"] == 0.95
        )  # fmt: skip
        source = (
            f"benchmarks/gate/results/gate_power.json rows: repeats {args.repeats}, 1.25%, cv 1%, "
            f"{measured['trials']} trials; the search's model stays Noise()"
        )
    power, alarm = float(measured["power"]), float(measured["gate_false_alarm"])
    started = time.monotonic()
    out: dict[str, object] = {
        "trials": args.trials, "seed": args.seed, "interaction": args.interaction,
        "power": power, "gate_false_alarm": alarm,
        "noise_source": source,
    }  # fmt: skip
    tables: dict[str, dict[str, object]] = {}
    for population in ("mixed", "single"):
        rng = random.Random(f"{args.seed}-{population}")
        cands = [draw(rng, args.interaction, population == "single") for _ in range(args.trials)]
        for noisy in ("measured", "noiseless"):
            noise = Noise(power, alarm) if noisy == "measured" else Noise(1.0, 0.0)
            for given in ("stack", "refused"):
                for mode in MODES:
                    mrng = random.Random(f"{args.seed}-{population}-{noisy}-{given}-{mode}")
                    rows = []
                    for cand in cands:
                        row = run_one(cand, mode, noise, given == "refused", mrng)
                        rows.append({**row, "units": cand.units, "kind": cand.kind})
                    by_kind: dict[str, object] = {"all": summarize(rows)}
                    for kind in sorted({str(r["kind"]) for r in rows}):
                        by_kind[kind] = summarize([r for r in rows if r["kind"] == kind])
                    tables[f"{population}/{noisy}/{given}/{mode}"] = by_kind
    out["results"] = tables
    out["seconds"] = round(time.monotonic() - started, 1)
    used = resource.getrusage(resource.RUSAGE_SELF)
    out["cpu_seconds"] = round(used.ru_utime + used.ru_stime, 1)
    out["load_average"] = [round(x, 2) for x in os.getloadavg()]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(out, indent=1) + "\n")
    lines = [
        "# Bisect searches on simulated candidates (benchmarks/bisect/bisect_search.py)",
        "",
        f"{args.trials} candidates per population, 10-60 units; {out['seconds']} s wall, "
        f"{out['cpu_seconds']} s CPU, load average {out['load_average']} at the end. Gate noise from "
        f"{source} (25 metrics): power {power:.4f}, gate false alarm {alarm:.4f}. "
        f"Mixed population: 1-3 culprit groups (1 with p=1/2, 2 and 3 with 1/4 each), a "
        f"group is a pair regressing only together with p={args.interaction}. Gates are "
        f"the bisect's own (the whole candidate's when --bad is a stack and the search gates "
        f"it; not the refused gate's when --bad is its JSON). The searches are validators/bisect/search.py's "
        f"bisect() with a simulated gate; noiseless rows: a gate of power 1, false alarm 0 (the search still assumes the measured noise). Right for binary: the named unit belongs to a culprit group; "
        f"for interaction: exactly the culprit groups named. seed {args.seed}, "
        f"{out['seconds']} s.",
        "",
        "| population | noise | --bad | search | class | n | right | median gates | p90 gates | right within log2(units)+2 gates | median log2(units)+2 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, by_kind in tables.items():
        population, noisy, given, mode = key.split("/")
        for kind, s in by_kind.items():  # type: ignore[attr-defined]
            lines.append(
                f"| {population} | {noisy} | {given} | {mode} | {kind} | {s['n']} | {100 * s['right']:.1f}% | "
                f"{s['median_gates']} | {s['p90_gates']} | {100 * s['right_within_log2_plus_2']:.1f}% | "
                f"{s['median_log2_units_plus_2']:.2f} |"
            )
    (RESULTS / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
