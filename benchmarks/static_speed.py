"""Default static verdict time on one env: cold (empty facts cache) then warm (same cache),
optionally interleaved with another checkout of the tool (the code before a change).

    python benchmarks/static_speed.py ENV [--targets 9.0,12.0a] [--warm 2] \
        [--before-tree /path/to/old/checkout] [--out benchmarks/results/static_speed_x.json]

Each run is `python -m validators static --env ENV --targets ... --json` in a child process
(the CLI a user runs, with the default caches under a fresh $STACKGATE_CACHE), timed for
wall and CPU (user+sys of the child and its children, i.e. the confirming loads too), with
the load average beside it: this machine's 2 cores are shared, so wall times move with load
and CPU times are the steadier number. Bytecode writing is left on (a user's Python writes
.pyc files; this harness's PYTHONDONTWRITEBYTECODE=1 would make every run compile the tool
and torch again). Runs in the order: before (if given), after cold, after warm x N, before.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def one_run(tree: Path, env: Path, targets: str, cache: Path, label: str) -> dict[str, Any]:
    child_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    child_env["STACKGATE_CACHE"] = str(cache)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "validators",
            "static",
            "--env",
            str(env),
            "--targets",
            targets,
            "--json",
        ],
        cwd=tree,
        env=child_env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    report = json.loads(done.stdout)
    results = report["results"]
    items = (
        results if isinstance(results, list) else [dict(check=k, **v) for k, v in results.items()]
    )
    summary = next(r for r in items if r["check"] == "static.abi.summary")
    arch = [r for r in items if r["check"].startswith("static.arch.")]
    row = {
        "label": label,
        "tree": str(tree),
        "exit": done.returncode,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "load_1min_at_start": round(load, 2),
        "abi_s": summary["duration_s"],
        "confirm_s": summary["evidence"].get("confirm_seconds"),
        "arch_scan_s": arch[0]["evidence"].get("scan_s") if arch else None,
        "verdicts": {r["check"]: r["status"] for r in items if r["status"] != "PASS"},
        "summary": summary["reason"],
    }
    print(json.dumps({k: row[k] for k in ("label", "wall_s", "cpu_s", "load_1min_at_start")}))
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("env", type=Path)
    parser.add_argument("--targets", default="9.0,12.0a")
    parser.add_argument("--warm", type=int, default=2)
    parser.add_argument("--before-tree", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="static-speed-") as scratch:
        cache = Path(scratch) / "cache"
        if args.before_tree:
            runs.append(one_run(args.before_tree, args.env, args.targets, cache, "before"))
        runs.append(one_run(REPO, args.env, args.targets, cache, "after-cold"))
        for i in range(args.warm):
            runs.append(one_run(REPO, args.env, args.targets, cache, f"after-warm-{i + 1}"))
        if args.before_tree:
            runs.append(one_run(args.before_tree, args.env, args.targets, cache, "before"))
    out = {"env": str(args.env), "targets": args.targets, "cpus": os.cpu_count(), "runs": runs}
    if args.out:
        args.out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
