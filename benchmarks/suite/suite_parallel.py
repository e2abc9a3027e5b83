"""Test suite wall time: serial (`-n 0`) against parallel (`-n auto --dist loadgroup`), in one run.

Runs the same pytest selection alternately serial and parallel (S P P S ... ABBA order, so a
machine whose load drifts during the run weighs on both sides alike), and prints each run's
wall time, its pass/fail counts and the serial/parallel ratio of the medians. The selection
defaults to the fast subset the nox matrix runs (no slow/network/buildah/slurm tests); pass
`--marks ""` for the whole suite (then each run takes many minutes here).

    python benchmarks/suite/suite_parallel.py [--python .nox/tests/bin/python] [--pairs 2]
        [--out benchmarks/suite/results/suite_parallel_<label>.json]

The machine's load average is printed before and after: on a shared machine the ratio is
what it is under that load, not on an idle one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FAST = "not slow and not network and not buildah and not slurm"
MODES = {"serial": ["-n", "0"], "parallel": ["-n", "auto", "--dist", "loadgroup"]}
SUMMARY = re.compile(r"(\d+) (passed|failed|skipped|errors?|deselected)")


def _run(python: str, mode: str, marks: str) -> dict[str, object]:
    args = [python, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", *MODES[mode]]
    if marks:
        args += ["-m", marks]
    t0 = time.monotonic()
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    counts = {kind: int(n) for n, kind in SUMMARY.findall(tail)}
    failures = [
        line.split(" - ")[0]
        for line in done.stdout.splitlines()
        if line.startswith(("FAILED ", "ERROR "))
    ]
    return {
        "mode": mode,
        "wall_s": round(wall, 1),
        "exit": done.returncode,
        "counts": counts,
        "failures": failures,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable, help="interpreter with the dev deps")
    parser.add_argument("--pairs", type=int, default=2, help="serial/parallel pairs (ABBA order)")
    parser.add_argument("--marks", default=FAST, help="pytest -m expression ('' = whole suite)")
    parser.add_argument("--out", type=Path, help="write the JSON result here too")
    args = parser.parse_args(argv)

    order: list[str] = []
    for i in range(args.pairs):
        order += ["serial", "parallel"] if i % 2 == 0 else ["parallel", "serial"]
    load_before = os.getloadavg()
    runs = []
    for i, mode in enumerate(order, 1):
        run = _run(args.python, mode, args.marks)
        runs.append(run)
        print(
            f"run {i}/{len(order)} {mode:8s} {run['wall_s']:7.1f} s  exit {run['exit']}  "
            f"{run['counts']}  load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        for failure in run["failures"]:  # type: ignore[attr-defined]
            print(f"    {failure}", flush=True)
    medians = {
        mode: statistics.median(float(r["wall_s"]) for r in runs if r["mode"] == mode)  # type: ignore[arg-type]
        for mode in MODES
    }
    result = {
        "marks": args.marks,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "runs": runs,
        "median_wall_s": medians,
        "serial_over_parallel": round(medians["serial"] / medians["parallel"], 2),
    }
    print(json.dumps(result, indent=2))
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if all(r["exit"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
