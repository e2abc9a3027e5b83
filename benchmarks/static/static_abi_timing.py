"""Static group timing on real SGLang-kernel envs (goal: <= 10 s with files in the page cache).

Envs: the ones tests/validators/test_real_wheels.py builds (uv installs of torch 2.9.1 /
2.10.0 + sgl-kernel 0.3.21 from PyPI, ~4 GB each) under ~/.cache/stackgate/abi-envs.
For each env: one warm-up run (page cache), then REPEATS timed runs of the whole static group
in-process, split by phase, and, as a baseline, the time binutils `nm -D` alone takes to list
the dynamic symbols of the same ELF objects (one process per file, no resolution at all).

    .venv/bin/python benchmarks/static/static_abi_timing.py [--repeats 3] [--out benchmarks/static/results/static_abi_timing.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path

from stackgate.manifest.loading import load_stack
from validators.static.abi_check import AbiChecker
from validators.static.environment import load_environment
from validators.static.run import StaticInputs, run_static

CACHE = Path(os.environ.get("STACKGATE_ABI_ENVS", Path.home() / ".cache" / "stackgate" / "abi-envs"))
GOAL_S = 10.0


def time_static(env: Path, stack: str) -> tuple[float, dict[str, float], list]:  # type: ignore[type-arg]
    manifest = load_stack(stack).manifest
    t = time.perf_counter()
    results = run_static(StaticInputs(env_path=env, manifest=manifest, targets=tuple(manifest.host.target_archs)))
    total = time.perf_counter() - t
    phases: dict[str, float] = {}
    for r in results:
        phase = r.check.split(".")[1] if r.check.count(".") >= 1 else r.check
        phases[phase] = max(phases.get(phase, 0.0), r.duration_s) if phase in ("abi", "arch") else (
            phases.get(phase, 0.0) + r.duration_s
        )
    return total, phases, results


def nm_baseline(env: Path) -> tuple[float, int]:
    environment = load_environment(env)
    checker = AbiChecker(environment)
    extensions, _ = checker.split_roots(environment.shared_objects())
    findings = checker.check(extensions)
    objects = {m.importer for m in findings.missing_symbols} | set(extensions)
    objects |= {Path(p) for p in checker.resolver._cache if str(p).startswith(str(env))}
    t = time.perf_counter()
    for obj in sorted(objects):
        subprocess.run(["nm", "-D", str(obj)], capture_output=True, check=False)
    return time.perf_counter() - t, len(objects)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="benchmarks/static/results/static_abi_timing.json")
    args = parser.parse_args()
    report: dict[str, object] = {
        "goal_s": GOAL_S, "repeats": args.repeats, "cpu_count": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)), "loadavg_at_start": os.getloadavg(),
        "python": platform.python_version(), "envs": {},
    }
    builder_env = Path(__file__).resolve().parents[2] / "envs" / "cu128" / "current"
    targets = [(f"torch-{t}", CACHE / f"torch-{t}") for t in ("2.9.1", "2.10.0")]
    targets.append(("sglang-0.5.9-cu128 (nox -s build-cu128)", builder_env))
    for torch, env in targets:
        if not env.is_dir():
            print(f"skip {torch}: {env} missing (run the network tests / nox -s build-cu128 first)")
            continue
        time_static(env, "cu128")  # warm the page cache
        runs = []
        for _ in range(args.repeats):
            cpu0 = time.process_time()
            total, phases, results = time_static(env, "cu128")
            runs.append({"wall_s": round(total, 3), "cpu_s": round(time.process_time() - cpu0, 3),
                         "phases_s": {k: round(v, 3) for k, v in phases.items()}})
        summary = next(r for r in results if r.check == "static.abi.summary").evidence
        kernel = next((r for r in results if r.check == "static.abi.sgl_kernel"), None)
        nm_s, nm_files = nm_baseline(env)
        median = statistics.median(r["wall_s"] for r in runs)
        entry = {
            "runs": runs, "median_wall_s": median, "ratio_to_goal": round(median / GOAL_S, 3),
            "extension_modules": summary["extension_modules"],
            "objects_checked": summary["objects_checked"], "imports_checked": summary["imports_checked"],
            "sgl_kernel": {"status": kernel.status, "reason": kernel.reason} if kernel else None,
            "nm_D_baseline_s": round(nm_s, 3), "nm_D_files": nm_files,
            "static_vs_nm_ratio": round(median / nm_s, 3) if nm_s else None,
        }
        report["envs"][torch] = entry  # type: ignore[index]
        print(f"{torch}: static group median {median:.2f} s over {args.repeats} runs "
              f"(goal {GOAL_S:.0f} s, ratio {median / GOAL_S:.2f}); "
              f"{summary['extension_modules']} extensions, {summary['objects_checked']} objects, "
              f"{summary['imports_checked']} imports; `nm -D` alone on {nm_files} files: {nm_s:.2f} s "
              f"(static/nm {median / nm_s:.2f})")
        if kernel:
            print(f"  {kernel.status} static.abi.sgl_kernel: {kernel.reason[:160]}")
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
