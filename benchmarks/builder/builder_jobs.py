"""Planned parallel build vs the best safe fixed -j found by a sweep, in a real memory cgroup
with no swap (goal: planned / best safe <= 1.15x). Needs root and a memory cgroup.

The build: TARGETS memory-hungry compile jobs (tests/helpers/memjobs.py: each grows to PEAK_MB
while burning CPU, like cicc/ptxas on a big unit) driven by make. The sweep runs
`make -jN` for each N inside a fresh cgroup with memory.max = LIMIT and swap 0, and notes
which N were OOM-killed; "best safe" is the fastest N that finished. "planned" runs
`python -m builder compile` inside the same kind of cgroup: the planner reads the cgroup's
limit and the manifest estimate (or, in the second variant, the peak the watchdog measured
on a first run whose estimate was 8x too small) and make gets MAKEFLAGS=-j<plan>.

Usage: sudo python benchmarks/builder/builder_jobs.py [--limit-mib 700] [--peak-mb 250] [--targets 8]
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

from tests.helpers.memjobs import (  # noqa: E402
    build_hog,
    cgroup_unavailable_reason,
    memory_cgroup,
    write_makefile,
)

MiB = 1024 * 1024
ENV = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}


def run_in_cgroup(argv: list[str], limit: int, src: Path) -> tuple[float, int, int, str]:
    subprocess.run(["make", "-C", str(src), "clean"], capture_output=True, check=True)
    with memory_cgroup(limit) as group:
        started = time.perf_counter()
        done = subprocess.run(group.wrap(argv), capture_output=True, text=True, env=ENV,
                              cwd=ROOT)
        elapsed = time.perf_counter() - started
        return elapsed, done.returncode, group.oom_kills(), done.stdout


def manifest(folder: Path, per_job_gb: float) -> Path:
    text = (ROOT / "tests/builder/data/smoke.toml").read_text().replace(
        'name = "smoke"', 'name = "jobsbench"')
    text += f"\n[build]\nmemory_per_job_gb = {per_job_gb}\nmemory_margin_gb = 0.1\n"
    path = folder / "jobsbench.toml"
    path.write_text(text)
    return path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit-mib", type=int, default=700)
    ap.add_argument("--peak-mb", type=int, default=250)
    ap.add_argument("--targets", type=int, default=8)
    ap.add_argument("--work-ms", type=int, default=100)
    ap.add_argument("--sweep", default="1,2,3,4,6,8")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    reason = cgroup_unavailable_reason()
    if reason:
        print(json.dumps({"benchmark": "builder_jobs", "skipped": reason}))
        return 0
    limit = args.limit_mib * MiB
    work = Path(tempfile.mkdtemp(prefix="sg-jobs-"))
    hog = build_hog(work / "src")
    src = work / "src"
    write_makefile(src, hog, targets=args.targets, peak_mb=args.peak_mb, work_ms=args.work_ms)

    sweep = []
    for jobs in [int(j) for j in args.sweep.split(",")]:
        elapsed, rc, ooms, _ = run_in_cgroup(["make", "-C", str(src), f"-j{jobs}"], limit, src)
        sweep.append({"jobs": jobs, "seconds": round(elapsed, 2), "ok": rc == 0,
                      "oom_kills": ooms})
        print(f"fixed -j{jobs}: {'ok' if rc == 0 else 'FAILED'} {elapsed:.2f} s, "
              f"{ooms} OOM kill(s)", file=sys.stderr)
    safe = [s for s in sweep if s["ok"]]
    best: dict[str, Any] | None = min(safe, key=lambda s: s["seconds"]) if safe else None

    def planned(per_job_gb: float, *flags: str) -> dict[str, object]:
        stack = manifest(work, per_job_gb)
        argv = [sys.executable, "-m", "builder", "compile", "--venv-root", str(work / "envs"),
                "--json", *flags, str(stack), "--", "make", "-C", str(src)]
        elapsed, rc, ooms, out = run_in_cgroup(argv, limit, src)
        data = json.loads(out) if out.strip() else {}
        plan = data.get("plan", {})
        return {"seconds": round(elapsed, 2), "ok": rc == 0, "oom_kills": ooms,
                "jobs": plan.get("jobs"), "limited_by": plan.get("limited_by"),
                "per_job_source": plan.get("memory_per_job_source"),
                "pauses": data.get("pauses"), "peak_job_rss_mib": (data.get("peak_job_rss") or 0)
                // MiB}

    estimate_gb = round(args.peak_mb * 1.1 / 1024, 3)
    bad_first = planned(args.peak_mb / 8 / 1024, "--no-history")  # watchdog run, writes history
    # The machine is shared: time best-safe and planned builds alternately, take medians.
    best_t: list[float] = []
    manifest_runs: list[dict[str, object]] = []
    measured_runs: list[dict[str, object]] = []
    for _ in range(args.rounds if best else 0):
        best_t.append(run_in_cgroup(["make", "-C", str(src), f"-j{best['jobs']}"], limit, src)[0])
        manifest_runs.append(planned(estimate_gb, "--no-history"))
        measured_runs.append(planned(args.peak_mb / 8 / 1024))

    def median_run(runs: list[dict[str, object]]) -> dict[str, object]:
        ordered = sorted(runs, key=lambda r: float(str(r["seconds"])))
        return {**ordered[len(ordered) // 2], "all_seconds": [r["seconds"] for r in runs]}

    from_manifest = median_run(manifest_runs) if manifest_runs else {}
    from_measurement = median_run(measured_runs) if measured_runs else {}
    if best:
        best = {**best, "median_seconds": round(statistics.median(best_t), 2),
                "all_seconds": [round(t, 2) for t in best_t]}

    result = {
        "benchmark": "builder_jobs",
        "limit_mib": args.limit_mib, "peak_mb_per_job": args.peak_mb, "targets": args.targets,
        "sweep": sweep,
        "best_safe": best,
        "planned_manifest_estimate": {"estimate_gb": estimate_gb, **from_manifest},
        "planned_bad_estimate_with_watchdog": bad_first,
        "planned_from_measured_peak": from_measurement,
        "ratio_planned_vs_best_safe": round(
            float(str(from_manifest["seconds"])) / best["median_seconds"], 3) if best else None,
        "ratio_measured_plan_vs_best_safe": round(
            float(str(from_measurement["seconds"])) / best["median_seconds"], 3) if best else None,
        "goal": "ratio <= 1.15",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    print(json.dumps(result, indent=2))
    if best:
        print(f"planned / best safe fixed -j{best['jobs']} (medians of {args.rounds}): "
              f"{result['ratio_planned_vs_best_safe']:.3f}x (manifest estimate), "
              f"{result['ratio_measured_plan_vs_best_safe']:.3f}x (measured peak); goal <= 1.15x")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
