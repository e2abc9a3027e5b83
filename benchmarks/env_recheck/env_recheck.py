"""Cost of the tree-hash re-check (`builder verify`, mark-good, gate --interleave-with,
reproduce) on a real env: cold (an empty digest cache: every byte read) against warm (the
digest cache from the build: a stat per file, only files uv wrote for this env read).

Each run is a fresh `python` process calling stackgate.envtree.check_tree, as the commands do;
the cold run gets a new STACKGATE_CACHE_DIR (run once: it reads the whole env), the warm runs
the given cache dir (default: the user's, which the build filled). Reports wall and CPU seconds
(user+sys of the child), the load average, and the cold/warm ratio. Wall time on a loaded
machine is mostly waiting for a core; CPU time is what the re-check costs.

    python benchmarks/env_recheck/env_recheck.py [--env /work/envs/cu128/current] [--repeats 5]
        [--skip-cold] [--out benchmarks/env_recheck/results/env_recheck_cu128.json]
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
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHILD = (
    "import json, sys\n"
    "from pathlib import Path\n"
    "from stackgate.build_record import read_build_record\n"
    "from stackgate.envtree.digests import DigestCache\n"
    "from stackgate.envtree import check_tree\n"
    "env = Path(sys.argv[1])\n"
    "record = read_build_record(env)\n"
    "cache = DigestCache()\n"
    "check = check_tree(env, record.tree.sha256, scheme=record.tree.scheme, cache=cache)\n"
    "cache.close()\n"
    "print(json.dumps({'ok': check.ok, 'files': check.tree.files, 'bytes': check.tree.bytes,"
    " 'sha256': check.tree.sha256}))\n"
)


def _one(env: Path, cache_dir: str | None, src: Path = ROOT) -> dict[str, object]:
    child_env = dict(os.environ, PYTHONPATH=str(src))
    if cache_dir is not None:
        child_env["STACKGATE_CACHE_DIR"] = cache_dir
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, str(env)], env=child_env,
                          capture_output=True, text=True, check=True)  # fmt: skip
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {**json.loads(done.stdout), "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
            "loadavg_1m": round(os.getloadavg()[0], 1)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", type=Path, default=Path("/work/envs/cu128/current"))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cache-dir", default=None, help="warm digest cache (default: user's)")
    parser.add_argument("--skip-cold", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--before-src",
        type=Path,
        default=None,
        help="a second source tree (e.g. `git archive` of an older main) timed warm in the same "
        "run, interleaved; --before-cache is its digest cache (warm), --cache-dir this tree's",
    )
    parser.add_argument("--before-cache", default=None)
    args = parser.parse_args()
    env = args.env.resolve()
    if args.before_src is not None:
        _compare(env, args)
        return
    runs: dict[str, list[dict[str, object]]] = {"warm": [], "cold": []}
    # A warm run first, so the page cache holds the directory entries for every warm run.
    _one(env, args.cache_dir)
    for _ in range(args.repeats):
        runs["warm"].append(_one(env, args.cache_dir))
    if not args.skip_cold:
        with tempfile.TemporaryDirectory(prefix="stackgate-digests-") as empty:
            runs["cold"].append(_one(env, empty))
    summary: dict[str, object] = {"env": str(env), "host": platform.node(),
                                  "cpus": len(os.sched_getaffinity(0))}  # fmt: skip
    for kind, items in runs.items():
        if items:
            summary[f"{kind}_wall_s_median"] = statistics.median(
                float(str(r["wall_s"])) for r in items
            )
            summary[f"{kind}_cpu_s_median"] = statistics.median(
                float(str(r["cpu_s"])) for r in items
            )
    if runs["cold"] and runs["warm"]:
        summary["cold_over_warm_wall"] = round(
            float(str(summary["cold_wall_s_median"])) / float(str(summary["warm_wall_s_median"])), 1
        )
    payload = {"summary": summary, "runs": runs}
    text = json.dumps(payload, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")


def _compare(env: Path, args: argparse.Namespace) -> None:
    """Warm re-check of two source trees in one run: one warm-up each, then alternating."""
    sides = {
        "before": (args.before_src.resolve(), args.before_cache),
        "after": (ROOT, args.cache_dir),
    }
    runs: dict[str, list[dict[str, object]]] = {"before": [], "after": []}
    warmup = {name: _one(env, cache, src) for name, (src, cache) in sides.items()}
    for _ in range(args.repeats):
        for name, (src, cache) in sides.items():
            runs[name].append(_one(env, cache, src))
    summary: dict[str, object] = {"env": str(env), "host": platform.node(),
                                  "cpus": len(os.sched_getaffinity(0)), "warmup": warmup}  # fmt: skip
    for name, items in runs.items():
        summary[f"{name}_wall_s_median"] = statistics.median(float(str(r["wall_s"])) for r in items)
        summary[f"{name}_cpu_s_median"] = statistics.median(float(str(r["cpu_s"])) for r in items)
    summary["after_over_before_cpu"] = round(
        float(str(summary["after_cpu_s_median"])) / float(str(summary["before_cpu_s_median"])), 2
    )
    text = json.dumps({"summary": summary, "runs": runs}, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
