"""CLI start-up: lazy command discovery against importing every command module first.

Runs, interleaved in one run, `python -m builder --help`, `python -m builder check cu130` and
`python -m validators --help`, each both as shipped (lazy: only the chosen command's module is
imported) and "eager" (every command module of both packages imported before main, which is
what discovery did before). Reports the median wall time and CPU time (user+sys of the child)
per case, the fastest run's wall time (on a shared machine the closest to idle), and the
eager/lazy ratio. Wall time depends on the machine's load; CPU time less so.

    python benchmarks/startup.py [--repeats 15] [--out benchmarks/results/startup_<label>.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

EAGER = (
    "import importlib, pkgutil, sys\n"
    "for pkg in ('builder', 'validators'):\n"
    "    mod = importlib.import_module(pkg + '.commands')\n"
    "    for info in pkgutil.iter_modules(mod.__path__):\n"
    "        if not info.name.startswith('_'):\n"
    "            importlib.import_module(f'{pkg}.commands.{info.name}')\n"
    "from stackgate.cli import main_for\n"
    "pkg = sys.argv[1]\n"
    "sys.exit(main_for([pkg], 'python -m ' + pkg, 'd', sys.argv[2:]))\n"
)

CASES = {
    "builder --help": ["builder", "--help"],
    "builder check cu130": ["builder", "check", "cu130"],
    "validators --help": ["validators", "--help"],
}


def timed(argv: list[str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{argv} exited {done.returncode}: {done.stderr.decode()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    py = sys.executable
    samples: dict[str, dict[str, list[tuple[float, float]]]] = {
        name: {"lazy": [], "eager": []} for name in CASES
    }
    for words in CASES.values():  # warm the page cache and .pyc files once
        timed([py, "-m", *words])
        timed([py, "-c", EAGER, *words])
    for _ in range(args.repeats):
        for name, words in CASES.items():
            samples[name]["lazy"].append(timed([py, "-m", *words]))
            samples[name]["eager"].append(timed([py, "-c", EAGER, *words]))
    baseline = [timed([py, "-c", "pass"])[0] for _ in range(args.repeats)]
    rows = {}
    for name, by_mode in samples.items():
        row: dict[str, float] = {}
        for mode, pairs in by_mode.items():
            row[f"{mode}_wall_s"] = round(statistics.median(p[0] for p in pairs), 3)
            row[f"{mode}_cpu_s"] = round(statistics.median(p[1] for p in pairs), 3)
            # The fastest run is the one least disturbed by neighbours: the best idle estimate
            # a shared machine gives.
            row[f"{mode}_min_wall_s"] = round(min(p[0] for p in pairs), 3)
        row["eager_over_lazy_wall"] = round(row["eager_wall_s"] / row["lazy_wall_s"], 2)
        row["eager_over_lazy_cpu"] = round(row["eager_cpu_s"] / max(row["lazy_cpu_s"], 1e-3), 2)
        rows[name] = row
    result = {
        "host": {"machine": platform.machine(), "cpus": len(os.sched_getaffinity(0)),
                 "loadavg_at_end": os.getloadavg(), "python": platform.python_version()},
        "repeats": args.repeats,
        "bare_python_wall_s": round(statistics.median(baseline), 3),
        "bare_python_min_wall_s": round(min(baseline), 3),
        "cases": rows,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
