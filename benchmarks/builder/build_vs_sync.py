"""A build from a warm uv cache against `uv sync --frozen --link-mode copy` alone on the same
lock, measured in one run (goal: <= 1.2x with every check kept).

"Warm": uv's cache already holds every artifact (the first, untimed build fills it), so both
sides copy the same files out of it. Each round installs into a fresh folder, the order
alternating (ABBA), and the folder is removed before the next install (a cu128 env is 10 GB):
  sync       UV_PROJECT_ENVIRONMENT=<fresh> uv sync --frozen --no-install-project
             --link-mode copy  (in the lock's folder, into a venv made by `uv venv`, as the
             builder makes its own)
  stackgate  stackgate build STACK --venv-root <fresh>: CLI start-up, the lock and its origins
             (registry check; the index listing, network, runs beside the install, which is
             the same uv sync with --offline until the listing passed), interpreter, plan,
             venv, profile, installed set vs the lock, ONE read of every file for the tree
             hash and the RECORD check (started while uv installs), record, rename, current.
The build's own step timings (from its record) are kept per round, and the page cache's state
is the same for both sides (the files come from uv's cache, read by both).

With --settle, each side starts from the same state of the machine: the previous env's
removal written out (os.sync: its freed blocks and discards), the lock's unpacked wheels in uv's
cache read once (untimed) so both copy from the page cache, and no dirty pages left. Without it
a side pays for what the one before it left (measured: the same uv sync 22.8-32.3 s in one run).

With --baseline DIR (another checkout, e.g. `git archive MAIN | tar -x -C DIR`), each round
also builds with that checkout's code (kind `baseline`), so the code before and after a change
is measured against the same `uv sync` in one run.

Usage: python benchmarks/builder/build_vs_sync.py [STACK] [--rounds N] [--baseline DIR]
       [--settle] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable


def _child_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run(argv: list[str], *, env: dict[str, str], cwd: Path) -> tuple[float, str, float]:
    """(wall seconds, stdout, CPU seconds of the command and everything it waited for)."""
    cpu = _child_cpu()
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(argv)}\n{done.stderr[-3000:]}")
    return elapsed, done.stdout, _child_cpu() - cpu


def loadavg() -> float:
    return os.getloadavg()[0]


def lock_archives(uv_cache: Path, env: Path) -> list[Path]:
    """uv's unpacked copies of the wheels installed in env (by their `.dist-info` names)."""
    names = {p.name for p in env.glob("lib/python*/site-packages/*.dist-info")}
    return sorted(d.parent for d in uv_cache.glob("archive-v*/*/*.dist-info") if d.name in names)


def settle(archives: list[Path]) -> float:
    """Write out what the last side left, read the lock's unpacked wheels once (untimed), and
    write out again; the seconds it took."""
    started = time.perf_counter()
    os.sync()
    for archive in archives:
        for top, _dirs, names in os.walk(archive):
            for name in names:
                path = os.path.join(top, name)
                if os.path.isfile(path) and not os.path.islink(path):
                    with open(path, "rb") as handle:
                        while handle.read(1 << 20):
                            pass
    os.sync()
    return round(time.perf_counter() - started, 2)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("stack", nargs="?", default="cu128")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--python", default=None)
    ap.add_argument("--scratch", type=Path, default=None)
    ap.add_argument("--no-warmup", action="store_true", help="uv's cache is known to be warm")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout's code, too")
    ap.add_argument("--settle", action="store_true", help="each side from the same machine state")
    args = ap.parse_args()

    sys.path.insert(0, str(ROOT))
    from stackgate.layout import lock_files
    from stackgate.lock.state import read_lock
    from stackgate.manifest.loading import load_stack
    from stackgate.python_finder import find_python
    from stackgate.uvbin import uv_bin

    loaded = load_stack(args.stack)
    state = read_lock(loaded, lock_files(loaded.manifest.name, None))
    python = find_python(loaded.manifest.python, args.python)
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env.update({"UV_PYTHON_DOWNLOADS": "never", "NO_COLOR": "1", "PYTHONPATH": str(ROOT)})
    scratch = Path(tempfile.mkdtemp(prefix="sg-build-vs-sync-", dir=args.scratch))
    uv = str(uv_bin())

    def sync(target: Path) -> dict[str, object]:
        run([uv, "venv", "--no-config", "--relocatable", "--python", str(python.path),
             str(target)], env=env, cwd=ROOT)
        seconds, _, cpu = run(
            [uv, "sync", "--frozen", "--no-install-project", "--link-mode", "copy",
             "--python", str(target / "bin" / "python")],
            env={**env, "UV_PROJECT_ENVIRONMENT": str(target)},
            cwd=state.files.folder,
        )
        return {"s": round(seconds, 2), "cpu_s": round(cpu, 2)}

    def build(root: Path, code: Path = ROOT) -> dict[str, object]:
        load = loadavg()
        seconds, out, cpu = run(
            [PY, "-m", "builder", "build", str(loaded.path), "--venv-root", str(root),
             "--python", str(python.path), "--json"],
            env={**env, "PYTHONPATH": str(code)},
            cwd=code,
        )
        record = json.loads(out)["record"]
        return {
            "s": round(seconds, 2),
            "cpu_s": round(cpu, 2),
            "load_before": round(load, 1),
            "steps_s": record["timings_s"],
            "files": record["tree"]["files"],
            "bytes": record["tree"]["bytes"],
            "tree": record["tree"]["sha256"],
            "clashes": [c["path"] for c in (record.get("wheel_records") or {}).get("clashes", [])],
        }

    rounds: list[dict[str, object]] = []
    try:
        if not args.no_warmup:
            build(scratch / "warmup")  # fills uv's cache (untimed)
        archives: list[Path] = []
        if args.settle:
            from builder.venv.uv_cache import uv_cache_dir

            if not (scratch / "warmup").exists():
                build(scratch / "warmup")
            cache = uv_cache_dir(env)
            assert cache is not None, "--settle needs uv's cache folder"
            archives = lock_archives(cache, next((scratch / "warmup").glob("*/current")))
        shutil.rmtree(scratch / "warmup", ignore_errors=True)
        kinds = ["sync", "stackgate"] + (["baseline"] if args.baseline else [])
        for i in range(args.rounds):
            order = kinds if i % 2 == 0 else kinds[::-1]
            entry: dict[str, object] = {"order": order}
            for kind in order:
                target = scratch / f"{kind}{i}"
                if args.settle:
                    entry[f"settle_{kind}_s"] = settle(archives)
                entry[f"load_{kind}"] = round(loadavg(), 1)
                if kind == "sync":
                    entry[kind] = sync(target)
                elif kind == "baseline":
                    assert args.baseline is not None
                    entry[kind] = build(target, args.baseline.resolve())
                else:
                    entry[kind] = build(target)
                shutil.rmtree(target, ignore_errors=True)
            rounds.append(entry)
            print(json.dumps(entry), flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    sync_s = [float(r["sync"]["s"]) for r in rounds]  # type: ignore[index]
    build_s = [float(r["stackgate"]["s"]) for r in rounds]  # type: ignore[index]
    ratios = [b / s for b, s in zip(build_s, sync_s, strict=True)]
    sync_cpu = [float(r["sync"]["cpu_s"]) for r in rounds]  # type: ignore[index]
    build_cpu = [float(r["stackgate"]["cpu_s"]) for r in rounds]  # type: ignore[index]
    cpus = len(os.sched_getaffinity(0))
    result = {
        "benchmark": "build_vs_sync",
        "stack": loaded.manifest.name,
        "lock_hash": state.lock_hash[:12],
        "rounds": rounds,
        "sync_s": sync_s,
        "build_s": build_s,
        "ratio_per_round": [round(r, 3) for r in ratios],
        "ratio_median": round(statistics.median(build_s) / statistics.median(sync_s), 3),
        "goal": "ratio_median <= 1.2",
        "sync_cpu_s": sync_cpu,
        "build_cpu_s": build_cpu,
        # the build cannot end before its CPU work is spread over every core: with the median
        # sync's wall as the base, the least ratio this host allows for that much CPU
        "cpu_floor_ratio": round(
            statistics.median(build_cpu) / cpus / statistics.median(sync_s), 3
        ),
        "ratio_median_of_rounds": round(statistics.median(ratios), 3),
        "settled": args.settle,
        "archives_read": len(archives),
        "host": {"cpus": len(os.sched_getaffinity(0)), "load_end": round(loadavg(), 1)},
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if args.baseline:
        base_s = [float(r["baseline"]["s"]) for r in rounds]  # type: ignore[index]
        result["baseline"] = str(args.baseline)
        result["baseline_s"] = base_s
        result["baseline_ratio_per_round"] = [
            round(b / s, 3) for b, s in zip(base_s, sync_s, strict=True)
        ]
        result["baseline_ratio_median"] = round(
            statistics.median(base_s) / statistics.median(sync_s), 3
        )
    print(json.dumps(result, indent=2))
    print(
        f"warm build: stackgate build / uv sync --frozen --link-mode copy = "
        f"{result['ratio_median']:.3f}x (median of {args.rounds}; goal <= 1.2x); CPU s "
        f"build/sync = {statistics.median(build_cpu):.1f}/{statistics.median(sync_cpu):.1f}, "
        f"floor on {cpus} cores {result['cpu_floor_ratio']:.3f}x"
    )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
