"""Warm rebuild overhead of `python -m builder build` against raw `uv sync --frozen` of the same
lock, measured in one run (goal: <= 1.05x).

"Warm": uv's cache already holds every artifact (the first, untimed round fills it), so both
sides do the same install work. Each round builds into a fresh folder, alternating the order:
  raw       UV_PROJECT_ENVIRONMENT=<fresh> uv sync --frozen --no-install-project  (in the lock dir)
  stackgate python -m builder build STACK --venv-root <fresh>  (CLI start-up, lock check,
            interpreter probe, plan, flock, venv, the same uv sync, env profile, verify
            against the lock, tree hash, record, rename, current)
It also times the no-op case: the env for the lock already exists (stackgate reuses it;
raw uv sync checks the existing env).

Usage: python benchmarks/builder/builder_rebuild.py [STACK] [--rounds N] [--locks-dir DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable


def timed(argv: list[str], *, env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(argv)}\n{done.stderr[-2000:]}")
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("stack", nargs="?", default="cu128")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--locks-dir", type=Path, default=None)
    ap.add_argument("--python", default=None)
    ap.add_argument("--scratch", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    sys.path.insert(0, str(ROOT))
    from stackgate.layout import lock_files
    from stackgate.lock.state import read_lock
    from stackgate.manifest.loading import load_stack
    from stackgate.python_finder import find_python

    loaded = load_stack(args.stack)
    state = read_lock(loaded, lock_files(loaded.manifest.name, args.locks_dir))
    python = find_python(loaded.manifest.python, args.python)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV",)}
    env.update({"UV_PYTHON_DOWNLOADS": "never", "NO_COLOR": "1", "PYTHONPATH": str(ROOT)})
    scratch = Path(tempfile.mkdtemp(prefix="sg-bench-", dir=args.scratch))
    lock_dir = state.files.folder
    extra = ["--locks-dir", str(args.locks_dir)] if args.locks_dir else []

    def raw(target: Path) -> float:
        return timed(
            ["uv", "sync", "--frozen", "--no-install-project", "--python", str(python.path)],
            env={**env, "UV_PROJECT_ENVIRONMENT": str(target)},
            cwd=lock_dir,
        )

    def ours(root: Path) -> float:
        return timed(
            [PY, "-m", "builder", "build", str(loaded.path), "--venv-root", str(root),
             "--python", str(python.path), "--topology", "pcie", *extra],
            env=env,
            cwd=ROOT,
        )

    try:
        # Fill uv's cache and the digest cache (untimed).
        ours(scratch / "warmup")
        shutil.rmtree(scratch / "warmup")
        raw_t: list[float] = []
        ours_t: list[float] = []
        for i in range(args.rounds):
            pair = [("raw", scratch / f"raw{i}"), ("ours", scratch / f"ours{i}")]
            if i % 2:
                pair.reverse()
            for kind, target in pair:
                if kind == "raw":
                    raw_t.append(raw(target))
                else:
                    ours_t.append(ours(target))
            # Keep the last round for the no-op case.
            if i < args.rounds - 1:
                shutil.rmtree(scratch / f"raw{i}")
                shutil.rmtree(scratch / f"ours{i}")
        last = args.rounds - 1
        noop_raw = [raw(scratch / f"raw{last}") for _ in range(args.rounds)]
        noop_ours = [ours(scratch / f"ours{last}") for _ in range(args.rounds)]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    result = {
        "benchmark": "builder_rebuild",
        "stack": loaded.manifest.name,
        "lock_hash": state.lock_hash[:12],
        "packages": len(state.lock.dependencies()),
        "rounds": args.rounds,
        "raw_uv_sync_s": [round(t, 2) for t in raw_t],
        "stackgate_build_s": [round(t, 2) for t in ours_t],
        "ratio_median": round(statistics.median(ours_t) / statistics.median(raw_t), 3),
        "noop_raw_s": [round(t, 2) for t in noop_raw],
        "noop_stackgate_s": [round(t, 2) for t in noop_ours],
        "noop_ratio_median": round(statistics.median(noop_ours) / statistics.median(noop_raw), 3),
        "goal": "ratio_median <= 1.05",
        "host": {"cpus": len(os.sched_getaffinity(0))},
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    print(json.dumps(result, indent=2))
    print(f"warm rebuild: stackgate / raw uv sync --frozen = {result['ratio_median']:.3f}x "
          f"(median of {args.rounds}; goal <= 1.05x); no-op: {result['noop_ratio_median']:.2f}x")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
